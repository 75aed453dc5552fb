#!/usr/bin/env bash
# The libFuzzer harnesses of tests/fuzz (docs/fuzzing.md), built with clang in build-asan, the
# ASan + UBSan build that scripts/test.sh also runs the CPU tests from.
#   scripts/fuzz.sh SECONDS       build the harnesses, then run each for SECONDS (default 60)
#   scripts/fuzz.sh --build-only  build all of build-asan: the tests, the CLI and the harnesses
# Crashing inputs are written to build-asan/fuzz/findings/NAME/; the corpus each run grows is
# kept in build-asan/fuzz/corpus/NAME/ and seeds the next. Exits 1 when a harness found one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-asan -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DSPINDLE_SANITIZE_ADDRESS=ON -DSPINDLE_FUZZ=ON \
  -DSPINDLE_CUDA=OFF -DSPINDLE_VULKAN=OFF -DSPINDLE_BENCH=OFF >/dev/null
if [ "${1:-}" = --build-only ]; then
  cmake --build build-asan -j"$(nproc)"
  exit
fi
seconds=${1:-60}
harnesses=(safetensors config graph tokenizer)
cmake --build build-asan -j"$(nproc)" --target spindle "${harnesses[@]/#/spindle_fuzz_}"

# Seeds made fresh each run: small copies of the fixtures' safetensors files (their data cut
# so mutations land in the headers), and graph files from this build's CLI (a committed one
# would go stale with each graph format version).
work=build-asan/fuzz
rm -rf "$work/seeds"
mkdir -p "$work/seeds"/{safetensors,config,graph,tokenizer}
for f in tests/fixtures/*/*.safetensors; do
  python3 tests/fuzz/small_safetensors.py "$f" "$work/seeds/safetensors/$(basename "$(dirname "$f")")-$(basename "$f")"
done
for f in tests/fixtures/*/config.json tests/fuzz/seeds/config/*.json; do
  cp "$f" "$work/seeds/config/$(basename "$(dirname "$f")")-$(basename "$f")"
done
cp tests/fuzz/seeds/tokenizer/*.json "$work/seeds/tokenizer/"
variants=("" "--tune fused-mlp=16/4" "--tune o-proj-split=2 --tune down-split=16/4" "--tune kv-head-waits=on --tune o-proj-split=2")
for i in "${!variants[@]}"; do
  # shellcheck disable=SC2086  # each variant is several words
  log=$(./build-asan/host/spindle graph save --model synthetic:tiny --context 16 --tune attn-chunks=2 --tune stage-tasks=4 \
    ${variants[$i]} --out "$work/seeds/graph/tiny-$i.sptg" 2>&1) || { echo "$log" >&2; exit 1; }
done
# An MoE graph: its op parameter records, routed operands and the run-time expert checks.
log=$(./build-asan/host/spindle graph save --model synthetic:tiny-moe --context 16 --tune attn-chunks=2 --tune stage-tasks=4 \
  --out "$work/seeds/graph/tiny-moe.sptg" 2>&1) || { echo "$log" >&2; exit 1; }

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=()
for h in "${harnesses[@]}"; do
  mkdir -p "$work/corpus/$h" "$work/findings/$h"
  echo "fuzz: $h for ${seconds}s"
  if ! "./build-asan/tests/fuzz/spindle_fuzz_$h" "$work/corpus/$h" "$work/seeds/$h" -dict="tests/fuzz/$h.dict" \
      -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$work/findings/$h/" >"$work/$h.log" 2>&1; then
    tail -n 60 "$work/$h.log"
    failed+=("$h")
  fi
  { grep -E '^stat::(number_of_executed_units|new_units_added)' "$work/$h.log" || true; } | tr '\n' ' '
  echo
done
echo "fuzz: crashing inputs, if any, are in $PWD/$work/findings/"
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]} (reproduce: ./build-asan/tests/fuzz/spindle_fuzz_NAME FILE)" >&2
  exit 1
fi
