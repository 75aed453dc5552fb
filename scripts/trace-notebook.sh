#!/usr/bin/env bash
# Executes docs/notebooks/trace.ipynb on a trace of synthetic:tiny from the threaded executor,
# exported first with build/host/spindle, and fails when the notebook fails or leaves one of its
# PNG files out. The notebook's packages (scripts/requirements-notebook.txt) live in a virtual
# environment made once per machine under ~/.cache/spindle ($XDG_CACHE_HOME/spindle where that is
# set), and made again when that list changes.
#   bash scripts/trace-notebook.sh [OUT_DIR]   # default build/trace-notebook: the table, the PNGs
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build/trace-notebook}")  # the kernel runs in the notebook's folder
venv=${XDG_CACHE_HOME:-$HOME/.cache}/spindle/notebook-venv
requirements=scripts/requirements-notebook.txt
if ! cmp -s "$requirements" "$venv/requirements-notebook.txt"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$requirements"
  cp "$requirements" "$venv/requirements-notebook.txt"
fi
mkdir -p "$out"
rm -f "$out"/trace-*.png
build/host/spindle trace export --model synthetic:tiny -e threaded -w 2 -n 4 --copy-gib 0.0625 \
  -o "$out/trace.json" --csv "$out/tasks.csv" >"$out/summary.txt"
SPINDLE_TRACE_CSV="$out/tasks.csv" SPINDLE_TRACE_PNG_DIR="$out" "$venv/bin/jupyter-execute" docs/notebooks/trace.ipynb
for png in trace-timeline trace-ops trace-bandwidth; do
  [[ -s $out/$png.png ]] || { echo "trace-notebook: the notebook wrote no $out/$png.png" >&2; exit 1; }
done
echo "trace-notebook: $out/trace-timeline.png, trace-ops.png and trace-bandwidth.png"
