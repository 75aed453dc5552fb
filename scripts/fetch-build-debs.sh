#!/usr/bin/env bash
# Downloads (does not install) the .deb files of the build dependencies that the GPU machine
# lacks into build-deps/debs (ignored by git), for scripts/gpu-test.sh and gpu-variants.sh:
# SPINDLE_EXTRA_DEBS=build-deps/debs, and `carry` build-deps in the device call. The GPU machine
# has no package registry; these headers (and libssl3, which libssl-dev's link names) unpack
# into a private prefix there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build-deps/debs
cd build-deps/debs
apt-get download nlohmann-json3-dev libcli11-dev doctest-dev libeigen3-dev libssl-dev libssl3
ls -1
