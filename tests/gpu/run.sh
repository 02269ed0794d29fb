#!/usr/bin/env bash
# One command for overlapprof's GPU checks (tests/gpu/README.md):
#   tests/gpu/run.sh [BUILD_DIR] [--quick] [check.py options...]
#   tests/gpu/run.sh [BUILD_DIR] --workloads [--pairs ddp,fsdp,tp,pp] [--workload-nproc N] [...]
#   tests/gpu/run.sh [BUILD_DIR] --only-workloads [--pairs ...]
#   tests/gpu/run.sh [BUILD_DIR] --plugin [...]   # + NCCL's profiler plugin checks (plugin_check.py)
#   tests/gpu/run.sh [BUILD_DIR] --only-plugin [plugin_check.py options...]   # only those
# Builds overlapprof and samples/gemm_allreduce into BUILD_DIR (default: build) when they are missing,
# then runs tests/gpu/check.py, which writes tests/gpu/out/{results.json,results.md,fixtures/}.
# --workloads: then also every good/bad pair of the PyTorch reference workloads (samples/README.md)
# through samples/check_expectations.py, which writes tests/gpu/out/workloads/{expectations.json,.md}.
# BUILD_DIR may also be a bundle made by tests/gpu/bundle.sh on a machine with the build deps.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$root/build"
if [[ $# -gt 0 && "$1" != -* ]]; then
  build="$1"
  shift
fi
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
workloads=0 only_workloads=0 plugin=0 only_plugin=0 wl_args=() rest=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --workloads) workloads=1 ;;
    --plugin) plugin=1 ;;
    --only-plugin) plugin=1 only_plugin=1 ;;
    --only-workloads) workloads=1 only_workloads=1 ;;
    --pairs) wl_args+=(--pairs "${2:?--pairs needs a list}"); shift ;;
    --workload-nproc) wl_args+=(--nproc "${2:?--workload-nproc needs N}"); shift ;;
    *) rest+=("$1") ;;
  esac
  shift
done
set -- ${rest[@]+"${rest[@]}"}
# With --only-plugin the remaining options are plugin_check.py's (else check.py's).
plugin_args=()
if ((only_plugin)); then
  plugin_args=("$@")
  set --
fi

die() { echo "tests/gpu/run.sh: $*" >&2; exit 2; }

# 1. A GPU, or one clear line.
command -v nvidia-smi >/dev/null 2>&1 || die "no GPU: nvidia-smi not found (these checks need one NVIDIA GPU)"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
[[ "$gpus" -ge 1 ]] || die "no GPU: nvidia-smi lists no device (these checks need one NVIDIA GPU)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null || die "python3 >= 3.8 needed"
if ((workloads)); then
  python3 -c 'import torch' 2>/dev/null || die "--workloads needs PyTorch (import torch failed for $(command -v python3))"
fi

# 2. Libraries a carried build needs, and NCCL/cuBLAS from the Python wheels (lib_env.sh).
source "$here/lib_env.sh"
gpu_lib_env "$build"

# 3. Build what is missing.
sample=""
for s in "$build/samples/gemm_allreduce/gemm_allreduce" "$build/samples-standalone/gemm_allreduce"; do
  [[ -x "$s" ]] && sample="$s" && break
done
jobs="$(nproc 2>/dev/null || echo 4)"
if [[ ! -x "$build/overlapprof" ]]; then
  command -v cmake >/dev/null 2>&1 || die "no overlapprof in $build and no cmake to build it"
  echo "tests/gpu/run.sh: building overlapprof in $build" >&2
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  if ! cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DOVERLAPPROF_BUILD_TESTS=OFF -DOVERLAPPROF_BUILD_BENCH=OFF >"$build.configure.log" 2>&1; then
    tail -5 "$build.configure.log" >&2
    die "cannot configure overlapprof here (log: $build.configure.log); build it where its deps are, run tests/gpu/bundle.sh there and pass the bundle as BUILD_DIR"
  fi
  cmake --build "$build" -j "$jobs" >"$build.build.log" 2>&1 || { tail -20 "$build.build.log" >&2; die "build failed (log: $build.build.log)"; }
fi
[[ -x "$build/overlapprof" ]] || die "no overlapprof binary in $build after the build"
if ((!only_workloads)); then  # the gemm sample is not needed for the workloads alone
if [[ -z "$sample" ]]; then
  for s in "$build/samples/gemm_allreduce/gemm_allreduce" "$build/samples-standalone/gemm_allreduce"; do
    [[ -x "$s" ]] && sample="$s" && break
  done
fi
if [[ -z "$sample" ]]; then
  # The root CMakeLists.txt may not include samples/ (yet): build the sample on its own.
  command -v cmake >/dev/null 2>&1 || die "no gemm_allreduce in $build and no cmake to build it"
  nccl_root=""
  if [[ -z "${NCCL_ROOT:-}" ]] && ! compgen -G "/usr/local/cuda/include/nccl.h" >/dev/null; then
    nccl_root="$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)"
  fi
  echo "tests/gpu/run.sh: building samples/gemm_allreduce in $build/samples-standalone" >&2
  if ! { cmake -S "$root/samples/gemm_allreduce" -B "$build/samples-standalone" -DCMAKE_BUILD_TYPE=Release \
           ${nccl_root:+-DNCCL_ROOT="$nccl_root"} >"$build.sample.log" 2>&1 &&
         cmake --build "$build/samples-standalone" -j "$jobs" >>"$build.sample.log" 2>&1; }; then
    tail -20 "$build.sample.log" >&2
    die "cannot build samples/gemm_allreduce (log: $build.sample.log)"
  fi
  sample="$build/samples-standalone/gemm_allreduce"
fi
fi
if ldd ${sample:+"$sample"} "$build/overlapprof" 2>/dev/null | grep -q 'not found'; then
  ldd ${sample:+"$sample"} "$build/overlapprof" | grep 'not found' >&2
  die "shared libraries missing (above); set LD_LIBRARY_PATH or use a bundle (tests/gpu/bundle.sh)"
fi

# 4. The checks (a hard limit keeps a hung rank from eating the machine).
rc=0
if ((!only_workloads && !only_plugin)); then
  timeout --signal=TERM --kill-after=30 900 \
    python3 "$here/check.py" --build-dir "$build" --overlapprof "$build/overlapprof" --sample "$sample" "$@" || rc=$?
fi
# 4b. NCCL's profiler plugin (tests/gpu/plugin_check.py): per-op vs kernel timing, grouped calls, overhead.
if ((plugin)); then
  prc=0
  timeout --signal=TERM --kill-after=30 1200 \
    python3 "$here/plugin_check.py" --build-dir "$build" --overlapprof "$build/overlapprof" --sample "$sample" \
      ${plugin_args[@]+"${plugin_args[@]}"} || prc=$?
  if [[ $rc -eq 1 || $prc -eq 1 ]]; then rc=1; elif [[ $rc -ne 0 ]]; then :; else rc=$prc; fi
fi
# 5. The reference workloads, each good/bad pair under overlapprof run (samples/check_expectations.py).
if ((workloads)); then
  wrc=0
  timeout --signal=TERM --kill-after=30 3600 \
    python3 "$root/samples/check_expectations.py" --overlapprof "$build/overlapprof" \
      --out "$here/out/workloads" ${wl_args[@]+"${wl_args[@]}"} || wrc=$?
  # 1 (a check failed) wins over 2 (could not run), and both over 0.
  if [[ $rc -eq 1 || $wrc -eq 1 ]]; then rc=1; elif [[ $rc -ne 0 ]]; then :; else rc=$wrc; fi
fi
exit "$rc"
