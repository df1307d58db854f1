#!/usr/bin/env bash
# Build b12x and run `b12x selftest`: every available op on a default problem set against the CPU
# reference (GPU ops where a supported GPU is present; CPU paths otherwise).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${B12X_BUILD_DIR:-$root/build}
"$root/tools/build.sh" "$@"
"$build/tools/b12x" info
"$build/tools/b12x" selftest
