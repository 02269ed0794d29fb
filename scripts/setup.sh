#!/usr/bin/env bash
# One-command set-up on a fresh Debian 12: installs what is missing, builds, and runs the
# main job on its built-in default (analyze a bundled real PyTorch-profiler trace).
#   scripts/setup.sh            install + build + run the default analysis
#   scripts/setup.sh --no-run   install + build only
# Environment: BUILD_DIR (default build), BUILD_TYPE (default RelWithDebInfo).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}

packages=(cmake ninja-build g++ pkg-config python3 gzip
          libsqlite3-dev libfmt-dev nlohmann-json3-dev libcli11-dev libsimdjson-dev libdeflate-dev zlib1g-dev
          libmicrohttpd-dev  # run --watch-listen serves live metrics with it; optional to the build
          prometheus     # promtool checks the live metrics in the end-to-end test (tests/e2e/watch_test.py)
          libisal-dev    # ISA-L's igzip inflates gzip'd traces as they stream (~2.8x zlib); optional to the build
          libgtest-dev libbenchmark-dev
          clang libclang-rt-14-dev
          openmpi-bin    # the injector's end-to-end test runs a job under mpirun
          chromium       # the HTML report's end-to-end test opens the page in headless Chromium
          python3-torch) # samples/test_workloads_cpu.py runs the DDP reference workload with gloo on CPU
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" >/dev/null
ninja -C "$BUILD_DIR"

if [ "${1:-}" != "--no-run" ]; then
  echo
  echo "\$ $BUILD_DIR/overlapprof analyze tests/data/kineto/a100_2rank_rank0.json.gz --per-iteration"
  "$BUILD_DIR/overlapprof" analyze tests/data/kineto/a100_2rank_rank0.json.gz --per-iteration
fi
