#!/usr/bin/env python3
"""The what-if model end to end (docs/what-if.md) on tests/synth traces, whose generator is causal:
the replay gives back every measured step, and each scenario's predicted step equals the step of the
generator re-run with that change (communication 2x faster: latency halved and bandwidth doubled;
communication free; the straggler removed) within 1%. Also: the `what_if` section's shape, and the
terminal's "what would help" table.

Usage: what_if_test.py path/to/overlapprof
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SYNTH = os.path.join(HERE, "..", "synth", "synth.py")


def synth(out, *args):
    subprocess.run([sys.executable, SYNTH, out, "--ranks", "4", "--iterations", "8", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def analyze(exe, trace_dir):
    r = subprocess.run([exe, "analyze", trace_dir, "--json", "-", "--what-if"], check=True, capture_output=True, text=True)
    return json.loads(r.stdout)["what_if"]


def scenario(w, name):
    for s in w["scenarios"]:
        if s["name"] == name:
            return s
    raise AssertionError(f"no scenario {name!r}")


def within(pred, truth, tol, what):
    err = abs(pred - truth) / truth
    assert err <= tol, f"{what}: predicted {pred} ns, re-run {truth} ns ({100 * err:.3f}% off)"
    print(f"ok {what}: predicted {pred} ns, re-run {truth} ns ({100 * err:.3f}% off)")


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        cases = {}
        for sc in ("ddp", "fsdp", "tp"):
            base = os.path.join(tmp, sc)
            synth(base, "--scenario", sc, "--straggler", "2", "--straggler-delay-us", "3000")
            w = analyze(exe, base)
            assert len(w["replay"]) == 4, w["replay"]
            for r in w["replay"]:
                assert r["iterations"] >= 2, r
                assert r["max_error_pct"] == 0.0, r  # causal generator: the replay is exact
                assert r["replayed_step_ns"] == r["measured_step_ns"], r
                assert r["dependencies_inferred"] > 0, r
            assert [s["name"] for s in w["scenarios"]] == [
                "communication free", "communication 2x faster", "ranks arrive together", "host overhead gone"]
            for s in w["scenarios"]:
                assert s["predictable"] and s["why_not"] is None and s["assumptions"], s
                assert s["saving_ns"] == w["replayed_step_ns"] - s["predicted_step_ns"], s
            parts = ("compute", "communication", "waiting", "host", "launch", "memory", "other")
            paths = w["critical_path"]
            assert len(paths) == sum(r["iterations"] for r in w["replay"]), paths
            for p in paths:
                assert abs(sum(p[k] for k in parts) - 1) <= 0.0005, p
                assert p["length_ns"] > 0, p
            if sc == "ddp":  # the others wait for the straggler; its own path is compute
                for p in paths:
                    if p["rank"] == 2:
                        assert p["compute"] > 0.9 and p["waiting_for"] is None, p
                    else:
                        assert p["waiting"] > 0.1 and p["waiting_for"] == 2, p
            cases[sc] = w
            reruns = {
                "communication 2x faster": ["--latency-us", "10", "--bandwidth-gbps", "100"],
                "communication free": ["--latency-us", "0", "--bandwidth-gbps", "1e9"],
            }
            for name, args in reruns.items():
                d = os.path.join(tmp, f"{sc}-{len(args)}-{args[1]}")
                synth(d, "--scenario", sc, "--straggler", "2", "--straggler-delay-us", "3000", *args)
                within(scenario(w, name)["predicted_step_ns"], analyze(exe, d)["measured_step_ns"], 0.01,
                       f"{sc} {name}")
            d = os.path.join(tmp, f"{sc}-nostraggler")
            synth(d, "--scenario", sc)
            truth = analyze(exe, d)["measured_step_ns"]
            assert w["measured_step_ns"] - truth > 1000000, (w["measured_step_ns"], truth)  # the straggler costs
            within(scenario(w, "ranks arrive together")["predicted_step_ns"], truth, 0.01, f"{sc} ranks arrive together")
        # One rank alone: the cross-rank scenario says what is missing.
        one = os.path.join(tmp, "one")
        synth(one, "--scenario", "ddp")
        r = subprocess.run([exe, "analyze", os.path.join(one, "rank0.json"), "--json", "-", "--what-if"], check=True,
                           capture_output=True, text=True)
        s = scenario(json.loads(r.stdout)["what_if"], "ranks arrive together")
        assert not s["predictable"] and s["predicted_step_ns"] is None and s["why_not"] == "fewer than two modeled ranks", s
        # The latency/bandwidth fit on the run's matched transfers gives back synth's model of an all-reduce on 4
        # ranks: 20 us + bytes * 2 (n - 1) / n / 50 GB/s (without noise; with it, the lower envelope).
        exact = os.path.join(tmp, "ddp-exact")
        synth(exact, "--scenario", "ddp", "--noise", "0")
        fits = {f["op"]: f for f in analyze(exe, exact)["fit"]}
        f = fits["allreduce"]
        assert f["source"] == "transfers" and f["sizes"] >= 2 and f["why_not"] is None, f
        within(f["latency_ns"], 20000, 0.01, "fitted all-reduce latency (ns)")
        within(f["bandwidth_gbps"], 50 / 1.5, 0.01, "fitted all-reduce bandwidth (GB/s)")
        f = {f["op"]: f for f in cases["ddp"]["fit"]}["allreduce"]  # +-5% noise on every transfer
        within(f["bandwidth_gbps"], 50 / 1.5, 0.1, "fitted all-reduce bandwidth with noise (GB/s)")
        # Recorded dependencies through the CLI: an Nsight Systems export with CUPTI 12.8's eventSyncId.
        w = analyze(exe, os.path.join(HERE, "..", "data", "nsys", "h100_ddp2.sqlite"))
        assert len(w["replay"]) == 2, w["replay"]
        for r in w["replay"]:
            assert r["iterations"] >= 2 and r["dependencies_recorded"] >= 50, r
            assert r["max_error_pct"] == 0.0, r
        # The terminal's table, after the step split.
        # Off by default: no model, no section, no table.
        r = subprocess.run([exe, "analyze", os.path.join(tmp, "ddp"), "--json", "-"], check=True, capture_output=True,
                           text=True)
        assert "what_if" not in json.loads(r.stdout), "what_if without --what-if"
        r = subprocess.run([exe, "analyze", os.path.join(tmp, "ddp")], check=True, capture_output=True, text=True)
        assert "what would help" not in r.stdout, r.stdout
        r = subprocess.run([exe, "analyze", os.path.join(tmp, "ddp"), "--what-if"], check=True, capture_output=True,
                           text=True)
        out = r.stdout
        assert "what would help (model of up to 6 steady iteration(s) on 4 rank(s): step" in out, out
        # Every latency is measured: 0% is by construction, and the terminal says so instead of implying accuracy.
        assert "replay error 0.00%: the replay reproduces the measured steps by construction" in out, out
        assert "not its predictions" in out, out
        assert out.index("ranks (") < out.index("what would help"), out
        assert "communication 2x faster" in out, out
    print("what_if_test: ok")


if __name__ == "__main__":
    main()
