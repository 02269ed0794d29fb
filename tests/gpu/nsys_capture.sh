#!/usr/bin/env bash
# Record a real Nsight Systems profile of a 2-rank DDP step (torchrun under `nsys profile`, as users
# do) and export it to SQLite, for the nsys importer's fixtures: NCCL's own NVTX ranges with their payloads,
# one report holding two processes on one GPU.
#   tests/gpu/nsys_capture.sh [ITERS]
# The GPU machine has no `nsys` on PATH, but Nsight Compute ships Nsight Systems' CLI
# (host/target-linux-x64/nsys) and its importer (host/linux-desktop-glibc_2_11_3-x64/QdstrmImporter) in
# a layout where `nsys profile` cannot find the importer: it leaves a .qdstrm, which this script turns
# into a .nsys-rep with QdstrmImporter, then exports with `nsys export --type sqlite`.
# Every step has a time limit; what was made goes to $OUT (nsys_capture.log, *.sqlite.xz, nsys_env.txt).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$here/out/nsys}"
work="${NSYS_WORK:-/tmp/overlapprof-nsys}"
iters="${1:-4}"
mkdir -p "$out" "$work"
exec > >(tee -a "$out/nsys_capture.log") 2>&1
t0=$SECONDS
say() { echo "[nsys-capture +$((SECONDS - t0))s] $*"; }
nsys="${NSYS:-$(command -v nsys || ls /opt/nvidia/nsight-*/*/host/target-linux-x64/nsys /opt/nvidia/nsight-systems*/*/target-linux-x64/nsys 2>/dev/null | head -1)}"
qi="${QDSTRM_IMPORTER:-$(ls /opt/nvidia/nsight-*/*/host/*/QdstrmImporter /opt/nvidia/nsight-systems*/*/host-linux-x64/QdstrmImporter 2>/dev/null | head -1)}"
[[ -x "$nsys" ]] || { say "no nsys found"; exit 2; }
# QdstrmImporter there needs elfutils' libdw/libelf, which that machine lacks: tests/gpu/bundle.sh
# puts Debian's in BUNDLE/nsys-libs.
extra_libs="${NSYS_EXTRA_LIBS:-$here/../../gpu-bundle/nsys-libs}"
qi_run=(env "LD_LIBRARY_PATH=$extra_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$qi")
say "nsys: $nsys"
say "QdstrmImporter: ${qi:-none}"
{
  timeout 20 "$nsys" --version
  timeout 20 "$nsys" status -e
  [[ -n "$qi" ]] && LD_LIBRARY_PATH="$extra_libs" ldd "$qi" | grep 'not found'
  [[ -n "$qi" ]] && timeout 20 "${qi_run[@]}" --help
} > "$out/nsys_env.txt" 2>&1
cat "$out/nsys_env.txt" | head -60

capture() {  # capture NAME CMD...: profile, import, export; leaves $work/NAME.sqlite
  local name="$1"
  shift
  if [[ -n "${NSYS_REUSE:-}" && -f "$work/$name.qdstrm" ]]; then
    say "reusing $work/$name.qdstrm"
  else
    rm -f "$work/$name".*
    say "profile $name: $*"
    timeout --kill-after=15 150 "$nsys" profile -t cuda,nvtx,osrt -s none --cpuctxsw=none \
      --force-overwrite=true -o "$work/$name" "$@"
    say "profile $name: exit $?"
  fi
  ls -la "$work"
  if [[ ! -f "$work/$name.nsys-rep" ]]; then
    local q
    q="$(ls "$work/$name"*.qdstrm 2>/dev/null | head -1)"
    if [[ -n "$q" && -n "$qi" ]]; then
      say "import $q"
      (cd "$(dirname "$qi")" && timeout 150 "${qi_run[@]}" --input-file "$q") ||
        (cd "$(dirname "$qi")" && timeout 150 "${qi_run[@]}" -i "$q")
      say "import: exit $?"
      ls -la "$work"
      # The importer writes its report beside the .qdstrm, under the same base name.
      local rep="${q%.qdstrm}.nsys-rep"
      [[ -f "$rep" && "$rep" != "$work/$name.nsys-rep" ]] && mv "$rep" "$work/$name.nsys-rep"
    fi
  fi
  [[ -f "$work/$name.nsys-rep" ]] || { say "$name: no .nsys-rep"; return 1; }
  say "export $name"
  timeout 120 "$nsys" export --type sqlite --force-overwrite=true -o "$work/$name.sqlite" "$work/$name.nsys-rep"
  say "export: exit $?"
  [[ -f "$work/$name.sqlite" ]] || return 1
  python3 - "$work/$name.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
    n = db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
    print(f"table {t}: {n} rows")
cols = [r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")]
print("NVTX_EVENTS columns:", cols)
try:
    q = """SELECT COALESCE(e.text, s.value) AS t, COUNT(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s
           ON s.id = e.textId GROUP BY 1 ORDER BY 2 DESC LIMIT 40"""
    for row in db.execute(q):
        print("nvtx:", row)
    q = """SELECT e.*, s.value FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
           WHERE COALESCE(e.text, s.value) LIKE 'nccl%' LIMIT 6"""
    for row in db.execute(q):
        print("nvtx nccl:", row)
    for t in ("NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES", "NVTX_PAYLOAD_ENUMS"):
        try:
            for row in db.execute(f'SELECT * FROM "{t}" LIMIT 40'):
                print(t + ":", row)
        except Exception as e:
            print(t, e)
except Exception as e:
    print("nvtx query:", e)
PY
  local bundle="$here/../../gpu-bundle"
  [[ -x "$bundle/overlapprof" ]] &&
    LD_LIBRARY_PATH="$bundle/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 60 "$bundle/overlapprof" \
      analyze "$work/$name.sqlite"
  xz -T0 -6 -c "$work/$name.sqlite" > "$out/$name.sqlite.xz"
  ls -la "$out"
}

export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}"
rc=0
if [[ -n "${NSYS_PER_RANK:-}" ]]; then
  # One nsys per rank under torchrun (one report per rank, as on multi-node jobs): ddp2r0, ddp2r1.
  nsys_profile=("$nsys" profile -t cuda,nvtx,osrt -s none --cpuctxsw=none --force-overwrite=true)
  rm -f "$work"/ddp2r*
  say "profile per rank"
  timeout --kill-after=15 150 python3 -m torch.distributed.run --standalone --nproc_per_node=2 --no-python \
    "${nsys_profile[@]}" -o "$work/ddp2r%q{LOCAL_RANK}" python3 "$here/ddp_step.py" \
    --iters "$iters" --warmup 2 --layers 4 --width 1024 --batch 256
  say "profile per rank: exit $?"
  export NSYS_REUSE=1
  capture ddp2r0 true || rc=1
  capture ddp2r1 true || rc=1
  say "done, exit $rc"
  exit $rc
fi
# First the gemm sample, one rank, with its own ground truth (small); then the DDP job when time is left.
gemm="$here/../../gpu-bundle/samples/gemm_allreduce/gemm_allreduce"
if [[ -x "$gemm" ]]; then
  capture gemm1 "$gemm" --mode overlapped --iters 10 --warmup 3 --json "$out/gemm1.truth.json" --quiet || rc=1
fi
if ((SECONDS - t0 < ${NSYS_SECOND_BEFORE_S:-60})); then
  capture ddp2 python3 -m torch.distributed.run --standalone --nproc_per_node=2 "$here/ddp_step.py" \
    --iters "$iters" --warmup 2 --layers 4 --width 1024 --batch 256 || rc=1
fi
say "done, exit $rc"
exit $rc
