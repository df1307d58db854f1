#!/usr/bin/env bash
# Compile the library's device code for sm_89 (cicc + ptxas, nvcc -cubin per src/*.cu; no host
# pass: the host side has no __CUDA_ARCH__ and every build compiles it). SM89 runs the portable
# kernels, but no default architecture compiles its device code, so sm_90-only features (clusters,
# mbarrier try_wait, griddepcontrol, setmaxnreg, wgmma) outside __CUDA_ARCH__ guards break only
# here. Used by .ci/run and tools/gpu-check.sh (stage sm89).
#   tools/compile-sm89.sh BUILD_DIR (a configured build: its generated/include) OUT_DIR [JOBS]
# Prints one line "sm_89: N units, M failed" (and the first errors); exits non-zero on a failure.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=$1 out=$2 jobs=${3:-$(nproc)}
mkdir -p "$out"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
# Outside a git checkout (a snapshot), or in a directory a parent repository ignores: find.
git ls-files 'src/*.cu' >"$out/units.txt" 2>/dev/null
[ -s "$out/units.txt" ] || find src -name '*.cu' | sort >"$out/units.txt"
xargs -P "$jobs" -I{} sh -c \
  'nvcc -std=c++20 -O3 -DNDEBUG --expt-relaxed-constexpr -Xcudafe --diag_suppress=177 \
     -arch=sm_89 -cubin -Iinclude -I"$1"/generated/include -Isrc "$0" \
     -o "$2/$(echo "$0" | tr / _).cubin" || echo "FAILED $0"' {} "$build" "$out" \
  <"$out/units.txt" >"$out/sm89.log" 2>&1
n=$(wc -l <"$out/units.txt")
bad=$(grep -c "^FAILED" "$out/sm89.log")
echo "sm_89: $n units, $bad failed"
[ "$bad" -eq 0 ] || { grep -E "error|^FAILED" "$out/sm89.log" | head -20; exit 1; }
