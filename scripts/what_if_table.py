#!/usr/bin/env python3
"""The what-if figures of docs/what-if.md on the real traces: one Markdown row per file.

Usage: scripts/what_if_table.py build/overlapprof [TRACE_ROOT] (default /work/shared/traces: its kineto,
nsys and rocprof folders).
"""
import json, subprocess, sys, glob, os
exe = sys.argv[1]
root = sys.argv[2] if len(sys.argv) > 2 else '/work/shared/traces'
files = (sorted(glob.glob(f'{root}/kineto/*.gz')) + sorted(glob.glob(f'{root}/nsys/*.sqlite')) +
         sorted(glob.glob(f'{root}/rocprof/*.gz')))
print("| trace | ranks modeled | iterations | median error | max error | inferred edges | comm free | comm 2x | host gone |")
print("|---|---|---|---|---|---|---|---|---|")
for f in files:
    r = subprocess.run([exe, 'analyze', f, '--json', '-', '--what-if'], capture_output=True, text=True)
    w = json.loads(r.stdout)['what_if']
    mod = [x for x in w['replay'] if x['iterations'] > 0]
    def sc(n):
        s = [x for x in w['scenarios'] if x['name'] == n][0]
        return f"{s['saving_pct']:.1f}%" if s['predictable'] else "n/p"
    if not mod:
        print(f"| {os.path.basename(f)} | 0 of {len(w['replay'])} | - | - | - | - | not modeled: {w['replay'][0]['why_not']} | | |")
        continue
    print(f"| {os.path.basename(f)} | {len(mod)} of {len(w['replay'])} | {max(x['iterations'] for x in mod)} | "
          f"{max(x['median_error_pct'] for x in mod):.2f}% | {max(x['max_error_pct'] for x in mod):.2f}% | "
          f"{sum(x['dependencies_inferred'] for x in mod)} | {sc('communication free')} | {sc('communication 2x faster')} | {sc('host overhead gone')} |")
