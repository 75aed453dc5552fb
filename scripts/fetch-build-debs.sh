#!/usr/bin/env bash
# Downloads (does not install) the .deb files of the build dependencies that the GPU machine
# lacks into build-deps/debs (ignored by git), for scripts/gpu-test.sh and gpu-variants.sh:
# SPINDLE_EXTRA_DEBS=build-deps/debs, and `carry` build-deps in the device call. The GPU machine
# has no package registry; these headers (and libssl3, libpcre2-8-0 and libutf8proc2, which the
# -dev packages' links name) unpack into a private prefix there, with the Vulkan build's glslc
# (and libshaderc1) and libvulkan-dev (and libvulkan1, without which its link dangles). The
# loader the Vulkan runs need at run time goes in .gl/ (the device README says how).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build-deps/debs
cd build-deps/debs
apt-get download nlohmann-json3-dev libcli11-dev doctest-dev libeigen3-dev libssl-dev libssl3 \
  libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 glslc libshaderc1 libvulkan-dev libvulkan1
ls -1
