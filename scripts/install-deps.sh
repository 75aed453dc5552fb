#!/usr/bin/env bash
# Installs the Debian packages Spindle builds and tests with (idempotent; needs root or sudo).
set -euo pipefail
packages=(cmake ninja-build g++ libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev libbenchmark-dev
          libssl-dev libvulkan-dev glslc mesa-vulkan-drivers python3
          python3-venv  # the trace notebook's environment (scripts/trace-notebook.sh)
          libpcre2-dev libutf8proc-dev  # the tokenizer's split regex and NFC normalizer (docs/tokenizer.md)
          clang libclang-rt-dev)  # the ASan + UBSan build and libFuzzer (docs/fuzzing.md)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "spindle: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
