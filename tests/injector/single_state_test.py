#!/usr/bin/env python3
"""The injector keeps all its process-wide state in one object (injector/recorder.h).

Checks the compiled objects of injector/*.cc (objdump -t): the only writable data they
define is g_recorder and the hooks' per-thread state t_thread. Constants (.rodata,
.data.rel.ro) are fine; so are the NVTX header's own weak globals (nvToolsExt.h, vendor code)
and what the compiler adds (DW.ref personality pointers, sanitizer instrumentation).

Usage: single_state_test.py OBJECT...  (ctest injector_single_state passes the injector's objects)
"""
import re
import subprocess
import sys

ALLOWED = {"_ZN11overlapprof6inject10g_recorderE", "_ZN11overlapprof6inject8t_threadE"}
VENDOR = {"nvtxGlobals_v3", "InitializeInjectionNvtx2_fnptr"}  # NVTX's header-only implementation
# The compiler's own: exception personality pointers, sanitizer instrumentation (ASan's ODR
# indicators and the like, under OVERLAPPROF_SANITIZE / OVERLAPPROF_TSAN).
SANITIZER = ("DW.ref.", "__odr_asan", "__asan", "__tsan", "__ubsan", "__sancov", ".L")
WRITABLE = re.compile(r"^\.(data|bss|tdata|tbss)(\.|$)")


def writable_symbols(obj):
    out = subprocess.run(["objdump", "-t", obj], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 5 or not re.fullmatch(r"[0-9a-f]{16}", parts[0]):
            continue
        name = parts[-1]
        section = next((p for p in parts[1:] if p.startswith(".") or p == "*COM*"), "")
        if " d " in line or name == section:  # section symbols
            continue
        if section.startswith(".data.rel.ro") or not (WRITABLE.match(section) or section == "*COM*"):
            continue
        if name.startswith(SANITIZER) or name in VENDOR:
            continue
        yield section, name


def main():
    bad = []
    objs = [o for a in sys.argv[1:] for o in a.split(";") if o]  # ctest passes a CMake list
    if not objs:
        print("no objects given")
        return 2
    for obj in objs:
        for section, name in writable_symbols(obj):
            if name not in ALLOWED:
                bad.append(f"{obj}: {section} {name}")
    if bad:
        print("mutable file-scope state outside g_recorder (move it into the Recorder, injector/recorder.h):")
        print("\n".join(bad))
        return 1
    print(f"ok: {len(objs)} objects, writable data only in g_recorder and t_thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
