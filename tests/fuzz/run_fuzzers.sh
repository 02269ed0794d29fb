#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a bounded time.
#
#   tests/fuzz/run_fuzzers.sh [SECONDS_PER_TARGET]      (default 60)
#
# Environment:
#   FUZZ_TARGETS   targets to run, default "kineto kineto_stream store nvtx_payload rocprof"
#   FUZZ_BUILD_DIR build folder, default build-fuzz (relative to the repository root)
#   FUZZ_WORK_DIR  scratch corpora and artifacts, default tests/fuzz/corpus-work (gitignored)
#   FUZZ_JOBS      build parallelism, default: ninja's
#   FUZZ_EXTRA     extra libFuzzer flags for every target (e.g. "-seed=1")
#   FUZZ_REPLAY_LIMIT_S  wall-clock limit for replaying one saved reproducer, default 10
#
# Steps: (1) configure + build build-fuzz with clang (RelWithDebInfo, ASan+UBSan+libFuzzer);
# (2) replay the saved reproducers in tests/fuzz/crashers/<target>/ (regression check);
# (3) copy tests/fuzz/seeds/<target>/ into the scratch corpus and fuzz each target with
#     -max_total_time=SECONDS -timeout=10 -rss_limit_mb=2048 (and its dictionary).
# Exits 0 when nothing was found, 1 when a fuzzer found a crash, leak, timeout or OOM
# (the reproducer path is printed), 2 on a setup or build error.
set -uo pipefail

SECONDS_PER_TARGET="${1:-60}"
if ! [[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ ]] || [ "$SECONDS_PER_TARGET" -lt 1 ]; then
  echo "usage: $0 [SECONDS_PER_TARGET]" >&2
  exit 2
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
FUZZ_DIR="tests/fuzz"
BUILD_DIR="${FUZZ_BUILD_DIR:-build-fuzz}"
WORK_DIR="${FUZZ_WORK_DIR:-$FUZZ_DIR/corpus-work}"
TARGETS="${FUZZ_TARGETS:-kineto kineto_stream store nvtx_payload rocprof}"
REPLAY_LIMIT_S="${FUZZ_REPLAY_LIMIT_S:-10}"

log() { echo "[run_fuzzers] $*"; }
die() { echo "[run_fuzzers] error: $*" >&2; exit 2; }

# --- toolchain ---------------------------------------------------------------------------
find_clang() {
  for v in "" -14 -15 -16 -17 -18 -19; do
    if command -v "clang++$v" >/dev/null 2>&1 && command -v "clang$v" >/dev/null 2>&1; then
      CXX_BIN="$(command -v "clang++$v")"; CC_BIN="$(command -v "clang$v")"; return 0
    fi
  done
  return 1
}
# A program that links with -fsanitize=fuzzer proves that compiler-rt's libFuzzer is there.
can_link_fuzzer() {
  local tmp; tmp="$(mktemp -d)" || return 1
  printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' >"$tmp/t.cc"
  "$CXX_BIN" -fsanitize=fuzzer,address,undefined "$tmp/t.cc" -o "$tmp/t" >/dev/null 2>&1
  local rc=$?
  rm -rf "$tmp"
  return $rc
}
apt_install() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    die "missing $*; install them (Debian: apt-get install $*)"
  fi
  log "installing $* with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
    || die "apt-get install $* failed"
}

NEED=()
command -v cmake >/dev/null 2>&1 || NEED+=(cmake)
command -v ninja >/dev/null 2>&1 || NEED+=(ninja-build)
find_clang || NEED+=(clang-14 libclang-rt-14-dev)
[ ${#NEED[@]} -eq 0 ] || apt_install "${NEED[@]}"
find_clang || die "no clang++ found"
if ! can_link_fuzzer; then
  apt_install libclang-rt-14-dev
  can_link_fuzzer || die "$CXX_BIN cannot link -fsanitize=fuzzer,address,undefined programs"
fi
log "compiler: $CXX_BIN ($("$CXX_BIN" --version | head -n1))"

# Symbolized stacks in sanitizer reports.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in "$(dirname "$(readlink -f "$CXX_BIN")")/llvm-symbolizer" /usr/lib/llvm-14/bin/llvm-symbolizer \
           "$(command -v llvm-symbolizer 2>/dev/null)"; do
    if [ -n "$s" ] && [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH="$s"; break; fi
  done
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# --- build -------------------------------------------------------------------------------
mkdir -p "$WORK_DIR" || die "cannot create $WORK_DIR"
log "configuring $BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DOVERLAPPROF_BUILD_FUZZERS=ON -DOVERLAPPROF_BUILD_TESTS=OFF -DOVERLAPPROF_BUILD_BENCH=OFF \
  >"$WORK_DIR/configure.log" 2>&1 || { cat "$WORK_DIR/configure.log" >&2; die "cmake configure failed"; }
log "building fuzz targets"
ninja -C "$BUILD_DIR" ${FUZZ_JOBS:+-j "$FUZZ_JOBS"} fuzzers || die "build failed"

# --- run ---------------------------------------------------------------------------------
FAILED=0
SUMMARY=()
for t in $TARGETS; do
  bin="$BUILD_DIR/tests/fuzz/${t}_fuzzer"
  [ -x "$bin" ] || die "no fuzz target $bin"
  dict=()
  dict_name="$t"
  [ "$t" = kineto_stream ] && dict_name=kineto  # the same JSON keys
  [ -f "$FUZZ_DIR/$dict_name.dict" ] && dict=(-dict="$FUZZ_DIR/$dict_name.dict")
  work="$WORK_DIR/$t"
  corpus="$work/corpus"
  artifacts="$work/artifacts"
  tmp="$work/tmp"
  mkdir -p "$corpus" "$artifacts" "$tmp" || die "cannot create $work"
  rm -rf "${tmp:?}"/*
  case "$tmp" in /*) export OVERLAPPROF_FUZZ_TMPDIR="$tmp" ;; *) export OVERLAPPROF_FUZZ_TMPDIR="$ROOT/$tmp" ;; esac
  common=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/" "${dict[@]}")

  # Regression: every saved reproducer must now pass.
  crashers=()
  if [ -d "$FUZZ_DIR/crashers/$t" ]; then
    while IFS= read -r -d '' f; do crashers+=("$f"); done \
      < <(find "$FUZZ_DIR/crashers/$t" -type f ! -name '*.md' -print0 | sort -z)
  fi
  if [ ${#crashers[@]} -gt 0 ]; then
    log "$t: replaying ${#crashers[@]} saved reproducer(s) from $FUZZ_DIR/crashers/$t"
    # libFuzzer's -timeout does not fire when it only replays files: a wall-clock limit
    # (coreutils timeout) catches a reproducer that still hangs.
    for f in "${crashers[@]}"; do
      timeout -k 5 "$REPLAY_LIMIT_S" "$bin" "${common[@]}" -runs=1 "$f" >"$work/regress.log" 2>&1
      rc=$?
      if [ $rc -ne 0 ]; then
        what="exit $rc"
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && what="still running after ${REPLAY_LIMIT_S}s (hang)"
        tail -n 40 "$work/regress.log" >&2
        echo "[run_fuzzers] $t: FAILED on saved reproducer $f: $what (log: $work/regress.log)" >&2
        FAILED=1
        SUMMARY+=("$t: regression FAILED on $f ($what)")
      fi
    done
  fi

  # Seeds into the scratch corpus (which keeps what earlier runs found).
  cp -f "$FUZZ_DIR/seeds/$t"/* "$corpus/" 2>/dev/null || die "no seeds in $FUZZ_DIR/seeds/$t"
  if [ "$t" = store ]; then
    # Plus stores in the schema this build writes (the committed ones may be older).
    for src in "$FUZZ_DIR/seeds/store-src"/*.json; do
      [ -f "$src" ] || continue
      out="$corpus/current-schema-$(basename "$src" .json).db"
      "$BUILD_DIR/tests/fuzz/make_store_seed" "$src" "$out" 512 >"$work/make_seed.log" 2>&1 \
        || { cat "$work/make_seed.log" >&2; log "warning: could not write a store seed from $src"; }
    done
  fi
  before="$(find "$artifacts" -type f | sort)"
  log "$t: fuzzing for ${SECONDS_PER_TARGET}s (corpus $corpus, log $work/fuzz.log)"
  # shellcheck disable=SC2086
  "$bin" "${common[@]}" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
    ${FUZZ_EXTRA:-} "$corpus" >"$work/fuzz.log" 2>&1
  rc=$?
  rm -rf "${tmp:?}"/*
  after="$(find "$artifacts" -type f | sort)"
  new_artifacts="$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep -E '/(crash|leak|timeout|oom)-' || true)"
  final="$(grep -E '^#[0-9]+[[:space:]]+DONE' "$work/fuzz.log" | tail -n1)"
  [ -n "$final" ] || final="$(grep -E '^#[0-9]+' "$work/fuzz.log" | tail -n1)"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log" | tail -n1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/fuzz.log" | tail -n1)"
  cov="$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\/[0-9a-zA-Z]*\).*/cov \1, ft \2, corpus \3/p' <<<"$final")"
  if [ $rc -ne 0 ] || [ -n "$new_artifacts" ]; then
    FAILED=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY:|.*runtime error:|overlapprof fuzz:|ALARM:|==[0-9]+== ERROR: libFuzzer)' \
      "$work/fuzz.log" | head -n 5 >&2
    grep -E '^ *#[0-9]+ 0x' "$work/fuzz.log" | head -n 12 >&2
    repro="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$work/fuzz.log" | tail -n1)"
    [ -n "$repro" ] || repro="$(printf '%s\n' "$new_artifacts" | head -n1)"
    echo "[run_fuzzers] $t: FOUND A BUG (exit $rc). Reproducer: ${repro:-none written}" >&2
    echo "[run_fuzzers]   reproduce: $bin $repro" >&2
    echo "[run_fuzzers]   full log:  $work/fuzz.log" >&2
    SUMMARY+=("$t: FAILED (exit $rc), reproducer ${repro:-none}; ${execs:-?} runs, ${rate:-?} exec/s, ${cov:-no coverage line}")
  else
    SUMMARY+=("$t: ok, ${SECONDS_PER_TARGET}s, ${execs:-?} runs, ${rate:-?} exec/s, ${cov:-no coverage line}")
  fi
done

log "summary:"
for s in "${SUMMARY[@]}"; do log "  $s"; done
exit $FAILED
