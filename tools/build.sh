#!/usr/bin/env bash
# Configure and build b12x into ${B12X_BUILD_DIR:-build}. Extra arguments go to CMake's configure
# step, e.g. tools/build.sh -DCMAKE_CUDA_ARCHITECTURES=90a
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${B12X_BUILD_DIR:-$root/build}
jobs=${B12X_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja "$@"
cmake --build "$build" -j"$jobs"
