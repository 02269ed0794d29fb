#!/usr/bin/env bash
# The whole test suite: install/build (as scripts/setup.sh), unit + golden + end-to-end
# tests (ctest), then each libFuzzer target for a bounded time.
#   FUZZ_SECONDS=N   seconds per fuzz target (default 60; 0 skips fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}

scripts/setup.sh --no-run
(cd "$BUILD_DIR" && ctest --output-on-failure -j2)
if [ "$FUZZ_SECONDS" != 0 ]; then
  tests/fuzz/run_fuzzers.sh "$FUZZ_SECONDS"
fi
