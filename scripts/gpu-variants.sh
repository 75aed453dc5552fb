#!/usr/bin/env bash
# Compile-time variants of the CUDA executor measured in one GPU-machine call: each variant is
# `spindle` built with its own compiler flags (given to nvcc and the C++ compiler alike, in
# build-var/NAME, CUDA only), then every model is benched with every variant in turn, in the
# same call, so their ms/token compare as ratios.
#
#   scripts/gpu-variants.sh NAME=FLAGS...       e.g. base= 'lif16=-DSP_EXP_LIF=16'
#   NAME=cuda:FLAGS                            flags for nvcc only, e.g. 'r0=cuda:-Xptxas --register-usage-level=0'
#   NAME=@TARBALL                              the sources of another commit, e.g. made by
#                                              `git archive -o old.tar REV` (untracked files travel)
#   NAME=@TARBALL:cuda:FLAGS                   those sources with flags for nvcc only
#   SPINDLE_EXTRA_DEBS=DIR      unpack the build dependencies' .debs first (as gpu-test.sh)
#   SPINDLE_VARIANT_MODELS="…"  models to bench (default: qwen3-0.6b qwen3-8b), synthetic presets
#   SPINDLE_VARIANT_BENCH="…"   bench options (default: megakernel and graph, position 1, 64 tokens)
#   SPINDLE_VARIANT_ROUNDS=N    bench the variants in turn N times (default 1), A B A B…, so a
#                               drift during the call shows as a drift, not as a difference
#   SPINDLE_VARIANT_TRACE="…"   variants whose trace is exported too (2 steps at a context of 128, so
#                               that --tune attn-chunks=8 fits, CSV, in traces.tar),
#                               with the bench options that shape the executor and the graph
#   SPINDLE_VARIANT_PROFILE="…" variants profiled by Nsight Compute on the first model: warp
#                               states and source counters of one launch of the bench options'
#                               persistent kernel (SPINDLE_VARIANT_PROFILE_KERNEL, default either
#                               executor's), per SASS instruction (CSV, in profiles.tar)
# Results go to $OUT (or build-var/logs) in four files, since the device tool brings back
# eight at most: bench.log, build.log, traces.tar and profiles.tar.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${OUT:-build-var/logs}
mkdir -p "$logs" build-var
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
args=(-DCMAKE_BUILD_TYPE=Release -DSPINDLE_BENCH=OFF -DSPINDLE_CUDA=ON -DSPINDLE_VULKAN=OFF -DSPINDLE_TESTS=OFF
      -DCMAKE_CUDA_ARCHITECTURES=90)
if [[ -n ${SPINDLE_EXTRA_DEBS:-} ]]; then
  prefix=/tmp/spindle-deps
  for deb in "$SPINDLE_EXTRA_DEBS"/*.deb; do dpkg -x "$deb" "$prefix" || exit 1; done
  args+=(-DCMAKE_PREFIX_PATH="$prefix/usr" -DOPENSSL_ROOT_DIR="$prefix/usr")
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

names=()
for v in "$@"; do
  name=${v%%=*} flags=${v#*=} src=.
  names+=("$name")
  cuda_flags=$flags
  if [[ $flags == cuda:* ]]; then
    cuda_flags=${flags#cuda:} flags=
  elif [[ $flags == @* ]]; then
    src=build-var/$name-src tarball=${flags#@} cuda_flags=
    if [[ $tarball == *:cuda:* ]]; then cuda_flags=${tarball#*:cuda:} tarball=${tarball%%:cuda:*}; fi
    rm -rf "$src" && mkdir -p "$src" && tar -xf "$tarball" -C "$src" || exit 1
    flags=
  fi
  (cmake -S "$src" -B "build-var/$name" -G Ninja "${args[@]}" "-DCMAKE_CUDA_FLAGS=$cuda_flags" "-DCMAKE_CXX_FLAGS=$flags" &&
     cmake --build "build-var/$name" --target spindle -j"$(($(nproc) / $# + 1))") >"build-var/build-$name.log" 2>&1 &
done
wait
for name in "${names[@]}"; do
  cat "build-var/build-$name.log" >>"$logs/build.log"
  [[ -x build-var/$name/host/spindle ]] || { echo "variant $name did not build:"; tail -n 30 "build-var/build-$name.log"; exit 1; }
done

read -r -a bench <<<"${SPINDLE_VARIANT_BENCH:---modes megakernel,graph --positions 1 --tokens 64 --reps 5}"
for model in ${SPINDLE_VARIANT_MODELS:-qwen3-0.6b qwen3-8b}; do
  for ((round = 1; round <= ${SPINDLE_VARIANT_ROUNDS:-1}; ++round)); do for name in "${names[@]}"; do
    echo "=== $name $model (round $round)" | tee -a "$logs/bench.log"
    "build-var/$name/host/spindle" bench --model "synthetic:$model" -e cuda "${bench[@]}" 2>&1 |
      tee -a "$logs/bench.log" | grep -E 'megakernel|graph|per-op|md5|ceiling'
  done; done
done
# The bench's options that shape the executor and the graph (e.g. the cluster program's), without
# the ones only `bench` takes, for the traces.
executor_opts=()
for ((i = 0; i < ${#bench[@]}; ++i)); do
  case ${bench[i]} in
    --modes | --positions | -n | --tokens | --reps | --copy-gib) ((++i)) ;;
    --json) ;;
    *) executor_opts+=("${bench[i]}") ;;
  esac
done
traces=()
for name in ${SPINDLE_VARIANT_TRACE:-}; do
  for model in ${SPINDLE_VARIANT_MODELS:-qwen3-0.6b qwen3-8b}; do
    csv=trace-$name-$model.csv
    "build-var/$name/host/spindle" trace export --model "synthetic:$model" -e cuda -p 1,2 -n 2 --context 128 -o /tmp/trace.json \
      --csv "build-var/$csv" "${executor_opts[@]}" >>"$logs/bench.log" 2>&1 && gzip -f "build-var/$csv" &&
      traces+=("$csv.gz")
  done
done
((${#traces[@]} == 0)) || tar -cf "$logs/traces.tar" -C build-var "${traces[@]}"
profiles=()
for name in ${SPINDLE_VARIANT_PROFILE:-}; do
  read -r -a models <<<"${SPINDLE_VARIANT_MODELS:-qwen3-0.6b}"
  rep=/tmp/profile-$name csv=profile-$name.csv
  ncu --clock-control none --section WarpStateStats --section SourceCounters \
    -k "${SPINDLE_VARIANT_PROFILE_KERNEL:-regex:cluster_kernel|persistent}" -c 1 -f -o "$rep" \
    "build-var/$name/host/spindle" bench --model "synthetic:${models[0]}" -e cuda "${bench[@]}" >>"$logs/bench.log" 2>&1 &&
    ncu -i "$rep.ncu-rep" --page source --csv --print-source sass >"build-var/$csv" 2>>"$logs/bench.log" &&
    ncu -i "$rep.ncu-rep" --page details >>"$logs/bench.log" 2>&1 && gzip -f "build-var/$csv" && profiles+=("$csv.gz")
done
((${#profiles[@]} == 0)) || tar -cf "$logs/profiles.tar" -C build-var "${profiles[@]}"
