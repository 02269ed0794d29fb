#!/usr/bin/env bash
# Records, on a GPU, the runs that the what-if model (docs/what-if.md) and the overlap-cost analysis
# are validated against, and brings their stores back; the analysis itself runs anywhere afterwards.
#   tests/gpu/record_runs.sh BUNDLE [SETS]        SETS: comma list, default gemm,overhead,ddp,fsdp,pp
#     gemm      samples/gemm_allreduce, 1 and 2 ranks: serial and overlapped (an A/B whose serial run is the
#               ground truth of the GEMMs alone), overlapped with CUDA_DEVICE_MAX_CONNECTIONS=1, and
#               2 ranks with 1 and 8 NCCL channels
#     overhead  the gemm sample overlapped, 1 rank, untraced and traced alternated REPS times (default 3)
#     ddp       samples/ddp_buckets.py, 2 ranks: bucket cap 1000 and 25 MB, bf16 compression, accumulation 4
#     fsdp      samples/fsdp_prefetch.py, 2 ranks: prefetch off and on
#     pp        samples/pp_schedule.py, 2 ranks: 1F1B with a slow stage and without
# Each run: `overlapprof run -o RUN/store --no-analyze -- CMD`, then `analyze --json` and
# `analyze --what-if --json`, in REC_DIR (default tests/gpu/out/records)/SET/RUN/ with the workload's own
# figures (truth.json or sample.json) and its log. After each set its runs are packed as
# $OUT/records_SET.tar.xz (else REC_DIR/), split in 15 MB parts where larger, so a set cut by a time limit
# loses only itself. Every command runs under CMD_S seconds (default 150). Exit: 0, or 1 when a run failed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bundle="$(cd "${1:?usage: record_runs.sh BUNDLE [SETS]}" && pwd)"
sets="${2:-gemm,overhead,ddp,fsdp,pp}"
rec="${REC_DIR:-$here/out/records}"
out="${OUT:-$rec}"
source "$here/lib_env.sh"
gpu_lib_env "$bundle"
prof="$bundle/overlapprof"
sample=""
for s in "$bundle/samples/gemm_allreduce/gemm_allreduce" "$bundle/samples-standalone/gemm_allreduce"; do
  [[ -x "$s" ]] && sample="$s" && break
done
export PYTHONUNBUFFERED=1 NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"
cmd_s="${CMD_S:-150}"
rc=0
mkdir -p "$rec" "$out"

traced() {  # traced SET NAME [VAR=VALUE ...] -- CMD...: one traced run and its two analyses
  local set="$1" name="$2" d
  shift 2
  local envs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do envs+=("$1"); shift; done
  shift
  d="$rec/$set/$name"
  rm -rf "$d" && mkdir -p "$d"
  local t0=$SECONDS prc=0
  (cd "$d" && env ${envs[@]+"${envs[@]}"} timeout -k 10 "$cmd_s" "$prof" run -o store --no-analyze -- "$@") \
    >"$d/log.txt" 2>&1 || prc=$?
  timeout -k 10 "$cmd_s" "$prof" analyze "$d/store" --json "$d/summary.json" --force >>"$d/log.txt" 2>&1
  local arc=$?
  timeout -k 10 "$cmd_s" "$prof" analyze "$d/store" --what-if --json "$d/what_if.json" >>"$d/log.txt" 2>&1
  echo "$name: run exit $prc, analyze exit $arc, $((SECONDS - t0)) s, $(du -sh "$d/store" 2>/dev/null | cut -f1) (${envs[*]:-} $*)"
  ((prc == 0)) || rc=1
}

untraced() {  # untraced SET NAME -- CMD...: the same command without overlapprof
  local set="$1" name="$2"
  shift 3
  mkdir -p "$rec/$set/$name"
  (cd "$rec/$set/$name" && timeout -k 10 "$cmd_s" "$@") >"$rec/$set/$name/log.txt" 2>&1 ||
    { echo "$name: exit $?"; rc=1; }
}

pack() {  # pack SET: its runs as $out/records_SET.tar.xz (15 MB parts where larger)
  local set="$1" f="$out/records_$1.tar.xz"
  [[ -d "$rec/$set" ]] || return
  tar -C "$rec" -cf - "$set" | xz -T0 -6 >"$f"
  if (($(stat -c %s "$f") > 15 * 1024 * 1024)); then
    split -b 15M -d "$f" "$f.part" && rm -f "$f"
  fi
  ls -l "$out"/records_"$set".tar.xz* | awk '{print "packed:", $5, $NF}'
}

gemm() {  # gemm ARGS...: the sample's command line with its ground truth
  echo "$sample" --iters 20 --warmup 3 --json truth.json --timeout 120 --quiet "$@"
}

IFS=, read -r -a order <<<"$sets"
for set in "${order[@]}"; do
  echo "=== set $set at +${SECONDS} s"
  case "$set" in
    gemm)
      [[ -n "$sample" ]] || { echo "gemm: no gemm_allreduce in $bundle"; rc=1; continue; }
      traced gemm serial_1rank -- $(gemm --mode serial)
      traced gemm overlapped_1rank -- $(gemm --mode overlapped)
      traced gemm overlapped_1rank_cdmc1 CUDA_DEVICE_MAX_CONNECTIONS=1 -- $(gemm --mode overlapped)
      traced gemm serial_2rank -- $(gemm --mode serial --nranks 2)
      traced gemm overlapped_2rank -- $(gemm --mode overlapped --nranks 2)
      traced gemm overlapped_2rank_ch1 NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 -- $(gemm --mode overlapped --nranks 2)
      traced gemm overlapped_2rank_ch8 NCCL_MIN_NCHANNELS=8 NCCL_MAX_NCHANNELS=8 -- $(gemm --mode overlapped --nranks 2)
      traced gemm overlapped_2rank_cdmc1 CUDA_DEVICE_MAX_CONNECTIONS=1 -- $(gemm --mode overlapped --nranks 2)
      ;;
    overhead)
      [[ -n "$sample" ]] || continue
      for i in $(seq 1 "${REPS:-3}"); do
        untraced overhead "base_$i" -- "$sample" --mode overlapped --iters 30 --warmup 5 --json truth.json --quiet
        traced overhead "traced_$i" -- "$sample" --mode overlapped --iters 30 --warmup 5 --json truth.json --quiet
      done
      ;;
    ddp|fsdp|pp)
      torchrun=(python3 -m torch.distributed.run --standalone --nproc_per_node=2)
      case "$set" in
        ddp) runs=("cap1000|ddp_buckets.py --bucket-cap-mb 1000 --iters 8"
                   "cap25|ddp_buckets.py --bucket-cap-mb 25 --iters 8"
                   "bf16|ddp_buckets.py --bucket-cap-mb 25 --bf16-compress --iters 8"
                   "accum4|ddp_buckets.py --bucket-cap-mb 25 --accumulate 4 --iters 6 --gradient-as-bucket-view") ;;
        fsdp) runs=("prefetch_off|fsdp_prefetch.py --prefetch off --mlp-repeat 4"
                    "prefetch_on|fsdp_prefetch.py --prefetch on --mlp-repeat 4") ;;
        pp) runs=("1f1b_slow1|pp_schedule.py --schedule 1f1b --slow-stage 1"
                  "1f1b|pp_schedule.py --schedule 1f1b") ;;
      esac
      for r in "${runs[@]}"; do
        name="${r%%|*}" args=(${r#*|})
        traced "$set" "$name" -- "${torchrun[@]}" "$root/samples/${args[0]}" "${args[@]:1}" --json sample.json
      done
      ;;
    *) echo "unknown set $set (gemm, overhead, ddp, fsdp, pp)"; rc=1; continue ;;
  esac
  pack "$set"
done
echo "=== records: exit $rc after ${SECONDS} s"
exit "$rc"
