#!/usr/bin/env bash
# The whole test suite: installs what the tests need beyond the program's own build
# dependencies (scripts/setup.sh), builds everything (the program, the injector, tests, samples,
# benchmarks), runs unit + golden + end-to-end tests (ctest), the injector under ThreadSanitizer,
# then each libFuzzer target for a bounded time.
#   FUZZ_SECONDS=N   seconds per fuzz target (default 60; 0 skips fuzzing)
#   TSAN=0           skips the injector's ThreadSanitizer run (build-tsan/, ~2 min cold)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}

source scripts/packages.sh

scripts/setup.sh --no-run  # the program's build dependencies
install_missing libgtest-dev libbenchmark-dev gzip \
  clang libclang-rt-14-dev \
  openmpi-bin \
  chromium \
  python3-torch \
  prometheus \
  dpkg-dev file
# clang, libclang-rt: the libFuzzer targets. openmpi-bin: the injector's end-to-end test runs a job
# under mpirun. chromium: the HTML report's end-to-end test opens the page headless. python3-torch:
# samples/test_workloads_cpu.py runs the DDP reference workload with gloo on CPU. dpkg-dev, file:
# the Debian package's dependencies read from the binaries (dpkg-shlibdeps, tests/e2e/package_test.py).
# prometheus: promtool checks the live metrics in tests/e2e/watch_test.py.
cmake -S . -B "$BUILD_DIR" -G Ninja -DOVERLAPPROF_BUILD_TESTS=ON -DOVERLAPPROF_BUILD_BENCH=ON \
  -DOVERLAPPROF_BUILD_SAMPLES=ON >/dev/null
ninja -C "$BUILD_DIR"
(cd "$BUILD_DIR" && ctest --output-on-failure -j2)
# The injector under ThreadSanitizer: a separate build of only the injector, its test doubles
# and driver (-DOVERLAPPROF_TSAN=ON, injector/CMakeLists.txt), then ctest tsan_injector, which
# fails on any TSan report (tests/injector/tsan_test.py). Needs the injector (CUDA headers).
TSAN_DIR=${TSAN_DIR:-build-tsan}
if [ "${TSAN:-1}" != 0 ] && [ -e "$BUILD_DIR/injector/liboverlapprof_inject.so" ]; then
  cmake -S . -B "$TSAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOVERLAPPROF_TSAN=ON \
    -DOVERLAPPROF_BUILD_BENCH=OFF -DOVERLAPPROF_BUILD_SAMPLES=OFF >/dev/null
  ninja -C "$TSAN_DIR" overlapprof_inject nccl_driver cupti_fake injector_unit_tests
  (cd "$TSAN_DIR" && ctest --output-on-failure -R '^tsan_injector$')
fi
if [ "$FUZZ_SECONDS" != 0 ]; then
  tests/fuzz/run_fuzzers.sh "$FUZZ_SECONDS"
fi
