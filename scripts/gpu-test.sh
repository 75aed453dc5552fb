#!/usr/bin/env bash
# The GPU test run, made for one call on the GPU machine: configure and build for sm_90, the
# CUDA tests, compute-sanitizer memcheck and racecheck on a subset of them (sanitize_step), the
# CPU test suite, then a summary table (printed last). Each step's log goes to $OUT when set (the
# device tool brings that folder back), else build-gpu/logs.
#
#   SPINDLE_EXTRA_DEBS=DIR   unpack the .deb files in DIR (build dependencies) into a private
#                            prefix first, for a machine that has no package registry
#                            (scripts/fetch-build-debs.sh fills build-deps/debs)
#   SPINDLE_GPU_TIMING=1     also run the skipped-by-default timing test (real model shapes)
#   SPINDLE_GPU_BENCH="M…"   also build the CLI and run `spindle bench` on each model M (e.g.
#                            "qwen3-0.6b qwen3-8b"): every CUDA mode (ticket schedule), then the
#                            megakernel with static lists, at positions 1 and 4096 (bench.log)
#   SPINDLE_GPU_SANITIZE=0   skip compute-sanitizer (memcheck, racecheck); =memcheck or
#                            =racecheck runs that one alone
#   SPINDLE_GPU_SANITIZE_SHARD=k/n  run the sanitizers over the k-th of n shares of their
#                            test cases (cases k-1, k-1+n, …): racecheck over all of them takes
#                            longer than one device call, so it runs as 1/2, then 2/2
#   SPINDLE_GPU_CPU=0        skip building and running the CPU suite (with no vulkan step
#                            either, the build leaves the Vulkan path out)
#   SPINDLE_GPU_FIRST=…      run these steps first, in this order (a space-separated list of
#                            cuda-tests bench cluster-bench timing sanitize vulkan weight-read),
#                            so a short lease gets them
#   cluster-bench (a step)   `spindle bench` on qwen3-0.6b built for the cluster program
#                            (docs/two-hop-layer.md): the program against the graph mode on that
#                            graph, then main's megakernel and graph mode on the plain graph, at
#                            positions 1, 1024 and 4096 (bench.log)
#   vulkan (a step)          the Vulkan tests on the GPU's driver: unpacks the loader .debs in
#                            .gl/ first (the machine has no libvulkan1), VK_DRIVER_FILES set to
#                            NVIDIA's ICD unless given; then the dependency-hop timing test and,
#                            for each model of SPINDLE_GPU_BENCH, `spindle bench -e vulkan`
#   weight-read (a step)     bench/weight_read_bench.cu: the GEMV tile's ways of reading weights
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
  local log
  for log in "$logs"/*.log; do
    [[ -f $log ]] || continue
    case ${log##*/} in
      memcheck.log | racecheck.log)  # a run a test case: how many were clean
        echo "$log: $(grep -c -E 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$log") of" \
          "$(grep -c '^--- ' "$log") test cases clean" ;;
      *) grep -H -E '\[doctest\] test cases|tests passed' "$log" ;;
    esac
  done
}
trap summary EXIT

command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
order=${SPINDLE_GPU_FIRST:-cuda-tests sanitize timing bench}
wants() { [[ " $order " == *" $1 "* ]]; }
bench_programs=OFF
! wants weight-read || bench_programs=ON
vulkan=OFF  # the Vulkan path (shaders, loader) only when a step runs it
if wants vulkan || [[ ${SPINDLE_GPU_CPU:-1} == 1 ]]; then vulkan=ON; fi
# Every switch explicit: a build folder left by another configuration keeps its cache.
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DSPINDLE_BENCH=$bench_programs -DSPINDLE_CUDA=ON -DSPINDLE_VULKAN=$vulkan
            -DSPINDLE_TESTS=ON -DCMAKE_CUDA_FLAGS= -DCMAKE_CUDA_ARCHITECTURES=90)
if [[ -n ${SPINDLE_EXTRA_DEBS:-} ]]; then
  prefix=/tmp/spindle-deps
  step deps build 120 bash -c 'for deb in "$0"/*.deb; do dpkg -x "$deb" "$1" || exit 1; done' "$SPINDLE_EXTRA_DEBS" "$prefix" || exit 1
  cmake_args+=(-DCMAKE_PREFIX_PATH="$prefix/usr" -DOPENSSL_ROOT_DIR="$prefix/usr")
  export PATH=$prefix/usr/bin:$PATH  # glslc
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if wants vulkan && [[ -d .gl ]]; then  # before configuring, which looks for the loader
  step vulkan-loader build 120 bash -c 'for deb in .gl/*.deb; do dpkg -x "$deb" / || exit 1; done; ldconfig' || exit 1
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
fi

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$logs/gpu.txt" 2>&1
step configure build 300 cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" || exit 1
# The CUDA tests first, so that another area's broken build does not hide them.
cuda_tests=$build/tests/spindle_cuda_tests
targets=()
! wants cuda-tests && ! wants sanitize && ! wants timing || targets+=(spindle_cuda_tests)
if { [[ -n ${SPINDLE_GPU_BENCH:-} ]] && wants bench; } || wants cluster-bench; then targets+=(spindle); fi
((${#targets[@]} == 0)) || step build-cuda build 600 cmake --build "$build" -j"$jobs" --target "${targets[@]}" || exit 1
# Per kernel of the CUDA tests' binary: local-memory accesses (spills), 16-byte global loads,
# bulk copies and asynchronous copies in its SASS.
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-sass "$cuda_tests" 2>/dev/null | awk '
    /Function :/ { f = $3 }
    /LDL|STL/ { local_[f]++ }
    /LDG\.E\.128/ { ldg[f]++ }
    /UBLKCP/ { bulk[f]++ }
    /LDGSTS/ { ldgsts[f]++ }
    END { for (k in ldg) printf "sass %s: LDL/STL %d, LDG.E.128 %d, UBLKCP %d, LDGSTS %d\n", k, local_[k], ldg[k], bulk[k], ldgsts[k] }' \
    | tee -a "$logs/build.log" | grep -E 'persistent|stage_kernel'
fi
cuda_tests_step() { step cuda-tests cuda-tests 300 "$cuda_tests" --duration=true; }

# Under the sanitizers: the tiny subset; the hand-built model whose preloaded rows take the
# shared-memory dot (tiny's rows are too short for it); the HF fixtures in every mode; and, under
# memcheck only, the cluster program (qwen3-0.6b shapes) decoding and stopping at bad input with
# weight copies in flight. Racecheck follows barriers, not the cluster program's weight ring,
# whose readers hand a slot back by acq_rel shared atomics and whose refill (a bulk copy) lands
# by an mbarrier (megakernel/weight_ring.cuh): it reports every refill as racing with the slot's
# last readers (docs/two-hop-layer.md). Not the static schedule: it needs every block resident
# at once, which a sanitizer that serialises blocks would not give. One sanitizer run a test
# case, each case's seconds in the log, so a slow case is named and a share of the cases
# (SPINDLE_GPU_SANITIZE_SHARD) fits a device call.
sanitize_cases() {  # TOOL SANITIZER TESTS K N FILTERS...
  local tool=$1 sanitizer=$2 tests=$3 k=$4 n=$5 i=0 rc=0 t0 c
  shift 5
  local cases=()
  mapfile -t cases < <("$tests" --list-test-cases "$@" | grep -v -E '^(\[doctest\]|=+$)')
  ((${#cases[@]} > 0)) || { echo "no test case matches $*"; return 1; }
  for c in "${cases[@]}"; do
    ((i++ % n == k - 1)) || continue
    t0=$SECONDS
    # A comma separates doctest's filters: '?' (any one character) stands for it.
    "$sanitizer" --tool "$tool" --error-exitcode 1 "$tests" -tc="${c//,/?}" || rc=1
    echo "--- $tool, $((SECONDS - t0)) s: $c"
  done
  return $rc
}
sanitize_step() {
  local which=${SPINDLE_GPU_SANITIZE:-1} shard=${SPINDLE_GPU_SANITIZE_SHARD:-1/1} tool sanitizer k n
  [[ $which != 0 ]] || return 0
  [[ $shard =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] && k=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]} && ((k <= n)) ||
    { echo "SPINDLE_GPU_SANITIZE_SHARD is k/n with 1 <= k <= n, not '$shard'"; return 1; }
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  local both='tiny*,projection rows read from their preloaded copy*,cuda: the HF*'
  local -A cases=([memcheck]="$both,the cluster program stops at*" [racecheck]="$both")
  for tool in memcheck racecheck; do
    [[ $which == 1 || $which == "$tool" ]] || continue
    step "$tool" "$tool" 590 bash -c "$(declare -f sanitize_cases); sanitize_cases \"\$@\"" _ "$tool" "$sanitizer" \
      "$cuda_tests" "$k" "$n" -tc="${cases[$tool]}" -tce='*static*'
  done
}

timing_step() {
  [[ ${SPINDLE_GPU_TIMING:-0} == 1 ]] || return 0
  step timing timing 400 "$cuda_tests" -tc='timing*' --no-skip
  grep -E 'ms/token|GB/s|trace' "$logs/timing.log"
}

bench_step() {
  [[ -n ${SPINDLE_GPU_BENCH:-} ]] || return 0
  local m
  for m in $SPINDLE_GPU_BENCH; do
    step "bench-$m" bench 300 "$build/host/spindle" bench --model "synthetic:$m" -e cuda --positions 1,4096 \
      --tokens 64 --reps 5
    step "bench-$m-static" bench 300 "$build/host/spindle" bench --model "synthetic:$m" -e cuda --modes megakernel \
      --schedule static --positions 1,4096 --tokens 64 --reps 5
  done
  grep -E 'ceiling|model:|position|megakernel|per-op|graph' "$logs/bench.log"
}

cluster_bench_step() {
  local run=("$build/host/spindle" bench --model synthetic:qwen3-0.6b -e cuda --positions 1,1024,4096 --tokens 64 --reps 5)
  step cluster-bench bench 300 "${run[@]}" --modes megakernel,graph --tune cuda-cluster=on --tune kv-head-waits=on --tune o-proj-split=8 \
    --tune attn-chunks=8 --tune fused-mlp=96/8
  step cluster-bench-plain bench 300 "${run[@]}" --profile plain --modes megakernel,graph
  grep -E 'ceiling|model:|position|megakernel|graph' "$logs/bench.log"
}

vulkan_step() {
  step build-vulkan build 600 cmake --build "$build" -j"$jobs" --target spindle_vulkan_tests spindle || return 1
  "$build/host/spindle" info --model synthetic:tiny | grep vulkan | tee -a "$logs/vulkan.log"
  step vulkan-tests vulkan 400 "$build/tests/spindle_vulkan_tests" --duration=true
  step vulkan-hop vulkan 120 "$build/tests/spindle_vulkan_tests" -tc='timing*' --no-skip
  local m
  for m in ${SPINDLE_GPU_BENCH:-}; do
    step "vulkan-bench-$m" bench 300 "$build/host/spindle" bench --model "synthetic:$m" -e vulkan --positions 1,4096 \
      --tokens 16 --reps 5
  done
  grep -E 'hop|ceiling|model:|vulkan  ' "$logs/vulkan.log" "$logs/bench.log" 2>/dev/null
}

weight_read_step() {
  step build-bench build 600 cmake --build "$build" -j"$jobs" --target spindle_weight_read_bench || return 1
  step weight-read weight-read 400 "$build/bench/spindle_weight_read_bench" --benchmark_format=console \
    --benchmark_out="$logs/weight-read.json" --benchmark_out_format=json
  grep -E 'median' "$logs/weight-read.log"
}

for s in $order; do
  case $s in
    cuda-tests) cuda_tests_step ;;
    sanitize) sanitize_step ;;
    timing) timing_step ;;
    bench) bench_step ;;
    cluster-bench) cluster_bench_step ;;
    vulkan) vulkan_step ;;
    weight-read) weight_read_step ;;
  esac
done

# The CPU suite last: CI runs it too, so here it only shows the GPU machine agrees.
if [[ ${SPINDLE_GPU_CPU:-1} == 1 ]]; then
  step build-rest build 600 cmake --build "$build" -j"$jobs" -- -k 0
  step cpu-tests cpu-tests 300 ctest --test-dir "$build" -LE gpu -j"$jobs" --output-on-failure
fi
for r in "${results[@]}"; do [[ $r == pass ]] || exit 1; done
