#!/usr/bin/env bash
# One-command set-up on a fresh Debian 12: installs what the program needs to build, builds only
# the program (build/overlapprof), the injector (build/injector/, when the CUDA toolkit's headers
# are there), the man page and the shell completions, and runs the main job on its built-in default
# (analyze a bundled real PyTorch-profiler trace). Tests, samples and benchmarks are built by
# scripts/test.sh, which installs what they need. Then `cmake --install build` puts it on PATH
# (docs/install.md).
#   scripts/setup.sh            install + build + run the default analysis
#   scripts/setup.sh --no-run   install + build only
# Environment: BUILD_DIR (default build), BUILD_TYPE (default RelWithDebInfo).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
source scripts/packages.sh

install_missing cmake ninja-build g++ pkg-config \
  libsqlite3-dev libfmt-dev nlohmann-json3-dev libcli11-dev libsimdjson-dev libdeflate-dev zlib1g-dev \
  libisal-dev \
  libmicrohttpd-dev \
  python3  # generates the man page and the completions from the program's help at build time
# libisal-dev: ISA-L's igzip inflates gzip'd traces as they stream (~2.8x zlib); optional to the build.
# libmicrohttpd-dev: run --watch-listen serves live metrics with it; optional to the build.

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
  -DOVERLAPPROF_BUILD_TESTS=OFF -DOVERLAPPROF_BUILD_BENCH=OFF -DOVERLAPPROF_BUILD_SAMPLES=OFF >/dev/null
ninja -C "$BUILD_DIR"

if [ "${1:-}" != "--no-run" ]; then
  echo
  echo "\$ $BUILD_DIR/overlapprof analyze tests/data/kineto/a100_2rank_rank0.json.gz --per-iteration"
  "$BUILD_DIR/overlapprof" analyze tests/data/kineto/a100_2rank_rank0.json.gz --per-iteration
  echo
  echo "To put overlapprof on PATH: cmake --install $BUILD_DIR --prefix ~/.local   (docs/install.md)"
fi
