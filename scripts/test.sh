#!/usr/bin/env bash
# The whole CPU test suite: build, every CTest test, then the executor tests again under
# ThreadSanitizer. GPU tests are in scripts/gpu-test.sh and run on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" -LE gpu

cmake -S . -B build-tsan -G Ninja -DSPINDLE_SANITIZE_THREAD=ON -DSPINDLE_CUDA=OFF -DSPINDLE_BENCH=OFF >/dev/null
cmake --build build-tsan -j"$(nproc)" --target spindle_executors_tests
TSAN_OPTIONS="halt_on_error=1" ./build-tsan/tests/spindle_executors_tests
