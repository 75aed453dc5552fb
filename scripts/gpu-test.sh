#!/usr/bin/env bash
# The GPU test run, made for one call on the GPU machine: configure and build for sm_90, the
# CUDA tests, compute-sanitizer memcheck and racecheck on the tiny CUDA tests, the CPU test
# suite, then a summary table (printed last). Each step's log goes to $OUT when set (the
# device tool brings that folder back), else build-gpu/logs.
#
#   SPINDLE_EXTRA_DEBS=DIR   unpack the .deb files in DIR (build dependencies) into a private
#                            prefix first, for a machine that has no package registry
#   SPINDLE_GPU_TIMING=1     also run the skipped-by-default timing test (real model shapes)
set -uo pipefail
cd "$(dirname "$0")/.."
build=build-gpu
logs=${OUT:-$build/logs}
mkdir -p "$logs"
jobs=$(nproc)

names=() results=() seconds=()
# step NAME LOG TIMEOUT_S COMMAND...: runs it with its output appended to $logs/LOG.log (few
# files: the device tool brings back eight at most); on failure the log's tail is printed at
# once, so the reply shows it even if a later step runs long.
step() {
  local name=$1 log=$logs/$2.log limit=$3
  shift 3
  local t0=$SECONDS rc
  echo "=== $name: $*" >>"$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  rc=$?
  names+=("$name") seconds+=($((SECONDS - t0)))
  if ((rc == 0)); then results+=(pass); else results+=("FAIL ($rc)"); fi
  if ((rc != 0)); then
    echo "=== $name failed ($rc); last lines of $log:"
    tail -n 40 "$log"
  fi
  return $rc
}

summary() {
  echo
  printf '%-12s %-10s %s\n' step result seconds
  for i in "${!names[@]}"; do printf '%-12s %-10s %s\n' "${names[$i]}" "${results[$i]}" "${seconds[$i]}"; done
  grep -H -E '\[doctest\] test cases|ERROR SUMMARY|RACECHECK SUMMARY|tests passed' "$logs"/*.log 2>/dev/null
}
trap summary EXIT

command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DSPINDLE_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90)
if [[ -n ${SPINDLE_EXTRA_DEBS:-} ]]; then
  prefix=/tmp/spindle-deps
  step deps build 120 bash -c 'for deb in "$0"/*.deb; do dpkg -x "$deb" "$1" || exit 1; done' "$SPINDLE_EXTRA_DEBS" "$prefix" || exit 1
  cmake_args+=(-DCMAKE_PREFIX_PATH="$prefix/usr" -DOPENSSL_ROOT_DIR="$prefix/usr")
fi

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$logs/gpu.txt" 2>&1
step configure build 300 cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" || exit 1
# The CUDA tests first, so that another area's broken build does not hide them.
cuda_tests=$build/tests/spindle_cuda_tests
step build-cuda build 600 cmake --build "$build" -j"$jobs" --target spindle_cuda_tests || exit 1
step cuda-tests cuda-tests 300 "$cuda_tests" --duration=true

# The tiny subset under the sanitizers, without the static schedule: it needs every block
# resident at once, which a sanitizer that serialises blocks would not give.
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
tiny=(-tc='tiny*' -tce='*static*')
step memcheck memcheck 300 "$sanitizer" --tool memcheck --error-exitcode 1 "$cuda_tests" "${tiny[@]}"
step racecheck racecheck 300 "$sanitizer" --tool racecheck --error-exitcode 1 "$cuda_tests" "${tiny[@]}"

if [[ ${SPINDLE_GPU_TIMING:-0} == 1 ]]; then
  step timing timing 300 "$cuda_tests" -tc='timing*' --no-skip
  grep -E 'ms/token|GB/s|trace' "$logs/timing.log"
fi
# The CPU suite last: CI runs it too, so here it only shows the GPU machine agrees.
step build-rest build 600 cmake --build "$build" -j"$jobs" -- -k 0
step cpu-tests cpu-tests 300 ctest --test-dir "$build" -LE gpu -j"$jobs" --output-on-failure
for r in "${results[@]}"; do [[ $r == pass ]] || exit 1; done
