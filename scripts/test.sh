#!/usr/bin/env bash
# The whole CPU test suite: build, every CTest test, the trace notebook on a trace of the threaded
# executor (scripts/trace-notebook.sh), then the executor tests again under ThreadSanitizer, the
# CPU tests under ASan + UBSan, and each fuzz harness for 30 seconds (docs/fuzzing.md). GPU tests
# are in scripts/gpu-test.sh and run on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" -LE gpu
bash scripts/trace-notebook.sh

cmake -S . -B build-tsan -G Ninja -DSPINDLE_SANITIZE_THREAD=ON -DSPINDLE_CUDA=OFF -DSPINDLE_BENCH=OFF >/dev/null
cmake --build build-tsan -j"$(nproc)" --target spindle_executors_tests
# The qwen3-0.6b case takes 5 to 6 minutes under either sanitizer; the tiny cases run the same ops,
# gangs and pieces.
TSAN_OPTIONS="halt_on_error=1" ./build-tsan/tests/spindle_executors_tests -tce='qwen3-0.6b*'

bash scripts/fuzz.sh --build-only
export UBSAN_OPTIONS="print_stacktrace=1"
for area in loader tasks ops gates text; do
  "./build-asan/tests/spindle_${area}_tests"
done
# The qwen3-0.6b case, as under TSan. The worker-thread case runs the CLI under `ulimit -v
# 1048576`, too little address space for ASan's shadow memory.
./build-asan/tests/spindle_executors_tests -tce='qwen3-0.6b*'
./build-asan/tests/spindle_cli_tests -tce='a worker thread the system cannot start*'
bash scripts/fuzz.sh 30
