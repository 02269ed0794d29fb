#!/usr/bin/env bash
# Every GPU check in one call, sized for a short lease of a GPU machine (tests/gpu/README.md):
#   tests/gpu/device_session.sh BUNDLE [PARTS]      PARTS: comma list, default probe,plugin,recorder
#     probe      the machine: GPU, driver, PyTorch and its NCCL, where NCCL/CUPTI/cuBLAS are
#     plugin     tests/gpu/run.sh BUNDLE --only-plugin   (NCCL's profiler plugin)
#     recorder   tests/gpu/run.sh BUNDLE --quick          (recorder vs ground truth, overhead, DDP)
#     workloads  tests/gpu/run.sh BUNDLE --only-workloads (the reference good/bad pairs)
#     records    tests/gpu/record_runs.sh BUNDLE $RECORD_SETS (stores of the what-if and overlap-cost
#                validation runs, packed straight into $OUT as records_SET.tar.xz)
#     nsys       tests/gpu/nsys_capture.sh (Nsight Systems exports for the nsys importer;
#                NSYS_PER_RANK=1: one nsys per rank); its files go straight to $OUT
# BUNDLE: made here by `tests/gpu/bundle.sh build BUNDLE` (the GPU machine lacks the build deps).
# Each part has its own time limit (PLUGIN_S, RECORDER_S, WORKLOADS_S seconds), cut to what is left of
# TOTAL_S (default 450) for the whole session, and every command inside one at most CMD_S
# (GPU_CHECK_CMD_TIMEOUT), so a hung rank costs one part, not the lease.
# Results go to $OUT (the device tool's folder; else tests/gpu/out/session): session.log (all
# output), env.txt, and results.tar.gz (results, logs, the fixture stores to commit under
# tests/data/gpu/). Exit: the worst part's code (1 a check failed, 2 could not run, 124 timed out).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bundle="${1:?usage: device_session.sh BUNDLE [probe,plugin,recorder,workloads,records,nsys]}"
parts=",${2:-probe,plugin,recorder},"
out="${OUT:-$here/out/session}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 GPU_CHECK_CMD_TIMEOUT="${CMD_S:-90}"
exec > >(tee -a "$out/session.log") 2>&1
t0=$SECONDS
rc=0
part() {  # part NAME LIMIT_S CMD...: run one part under its limit, keep the worst exit code
  local name="$1" limit="$2"
  shift 2
  local left=$((${TOTAL_S:-450} - (SECONDS - t0) - 25))  # 25 s kept for packing the results
  ((left < limit)) && limit=$left
  if ((limit < 30)); then
    echo "=== $name: skipped, ${left} s left of TOTAL_S=${TOTAL_S:-450}"
    summary+=("$name: skipped")
    return
  fi
  echo "=== $name (limit ${limit} s) at +$((SECONDS - t0)) s: $*"
  local prc=0
  timeout --signal=TERM --kill-after=15 "$limit" "$@" || prc=$?
  echo "=== $name: exit $prc after +$((SECONDS - t0)) s"
  summary+=("$name: exit $prc")
  if ((prc == 1 || rc == 1)); then rc=1; elif ((prc != 0 && rc == 0)); then rc=$prc; fi
}
summary=()

if [[ "$parts" == *,probe,* ]]; then
  {
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    python3 - <<'PY' 2>&1
import glob, os, site
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(),
          "gpus", torch.cuda.device_count())
except Exception as e:
    print("torch: not usable:", e)
for r in sorted(set(site.getsitepackages())):
    for lib in ("libnccl.so*", "libcupti.so*", "libnvshmem*.so*"):
        for p in glob.glob(os.path.join(r, "nvidia", "**", lib), recursive=True):
            print("wheel lib:", p)
PY
    ls -l /usr/local/cuda/lib64/ 2>/dev/null | grep -E 'libnccl|libcupti|libcublas\.' || echo "no NCCL/CUPTI/cuBLAS in /usr/local/cuda/lib64"
    ls -l /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* 2>/dev/null || echo "no /usr/local/cuda/extras/CUPTI"
    echo "nsys: $(command -v nsys || echo 'not on PATH')"
    # The nsys importer's fixtures need a real export with NCCL's NVTX payloads: where could one come from on this machine?
    timeout 20 find / -xdev \( -name 'nsys' -o -name 'QdstrmImporter*' -o -name 'libToolsInjection*.so' \) \
      -not -path '/proc/*' 2>/dev/null | head -20 | sed 's/^/nsys part: /'
    ulimit -a | grep -E 'open files|locked'
    echo "cpus: $(nproc)  /dev/shm: $(df -h /dev/shm | awk 'NR==2{print $2}')"
  } > "$out/env.txt"
  cat "$out/env.txt"
fi
# The parts in the order given (what matters most first: a part cut by TOTAL_S writes no results).
IFS=, read -r -a order <<<"${parts//,,/,}"
for p in "${order[@]}"; do
  case "$p" in
    probe|"") ;;
    plugin) part plugin "${PLUGIN_S:-170}" "$here/run.sh" "$bundle" --only-plugin --reps "${PLUGIN_REPS:-3}" --iters 40 ;;
    recorder) part recorder "${RECORDER_S:-240}" "$here/run.sh" "$bundle" --quick ;;
    workloads) part workloads "${WORKLOADS_S:-240}" "$here/run.sh" "$bundle" --only-workloads ${PAIRS:+--pairs "$PAIRS"} ;;
    records) part records "${RECORDS_S:-330}" "$here/record_runs.sh" "$bundle" "${RECORD_SETS:-gemm,overhead,ddp,fsdp,pp}" ;;
    nsys) part nsys "${NSYS_S:-240}" "$here/nsys_capture.sh" "${NSYS_ITERS:-4}" ;;
    *) echo "=== $p: unknown part (probe, plugin, recorder, workloads, records, nsys)"; summary+=("$p: unknown"); rc=2 ;;
  esac
done

# What comes back: results, logs and the small stores (overhead stores are deleted by the checks).
( cd "$here/out" 2>/dev/null &&
  find . -type f \( -name '*.json' -o -name '*.md' -o -name '*.txt' -o -name '*.db' -o -name '*.sqlite' \) \
    -size -8M -not -path './session/*' -not -path './records/*' -print0 | tar --null -czf "$out/results.tar.gz" -T - ) || true
echo "=== session: ${summary[*]:-no part run}; $((SECONDS - t0)) s; exit $rc"
ls -l "$out"
exit "$rc"
