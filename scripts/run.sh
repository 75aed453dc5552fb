#!/usr/bin/env bash
# Set up, build and run the main job: decode on the embedded default model (a synthetic
# qwen3-0.6b) with the best executor available here. Arguments go to `spindle run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/host/spindle run "$@"
