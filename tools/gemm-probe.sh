#!/usr/bin/env bash
# Device probe of the linear kernels (run on the GPU machine, logs to $OUT): builds the gemm area,
# dumps the SASS of chosen kernels, profiles one launch per chosen case with Nsight Compute and
# times env variants with bench_gemm's probe filters.
#
#   tools/gemm-probe.sh [--sass REGEX] [--ncu "FORMAT SHAPE M"]... [--variant "ENV=VAL ..."]...
# Environment for the timing runs: B12X_BENCH_FORMATS, B12X_BENCH_SHAPES, B12X_BENCH_MS.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
build=${B12X_PROBE_BUILD:-build-probe}  # reuse tools/gpu-check.sh's build-gpu if it exists
sass_re=""
ncu_cases=()
variants=("")
while [ $# -gt 0 ]; do
  case "$1" in
    --sass) sass_re="$2"; shift 2 ;;
    --ncu) ncu_cases+=("$2"); shift 2 ;;
    --variant) variants+=("$2"); shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
t0=$(date +%s)
[ -f $build/build.ninja ] || cmake -S . -B $build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_BUILD_TYPE=Release -DB12X_AREAS="gemm;reference" >"$out/configure.log" 2>&1
if ! cmake --build $build -j"$(nproc)" --target b12x bench_gemm >"$out/build.log" 2>&1; then
  grep -E "error|FAILED" "$out/build.log" | head -20
  exit 1
fi
echo "build $(( $(date +%s) - t0 ))s"
for t in ncu nsys cuobjdump; do echo "$t: $(command -v $t || ls /usr/local/cuda/bin/$t 2>/dev/null)"; done
export PATH=$PATH:/usr/local/cuda/bin
if [ -n "$sass_re" ] && command -v cuobjdump >/dev/null; then
  cuobjdump -sass $build/libb12x.so | python3 -c '
import re, sys
pat = re.compile(sys.argv[1])
txt = sys.stdin.read()
for f in re.split(r"\n\s+Function : ", txt)[1:]:
    if pat.search(f.split("\n")[0]):
        print("Function : " + f)
' "$sass_re" >"$out/sass.txt"
  echo "sass: $(grep -c Function "$out/sass.txt") functions"
fi
bench=$build/bench/bench_gemm
for c in "${ncu_cases[@]}"; do
  set -- $c
  tag="$1-$2-$3"
  if command -v ncu >/dev/null; then
    B12X_BENCH_FORMATS=$1 B12X_BENCH_SHAPES=$2 B12X_BENCH_MS=$3 timeout 120 \
      ncu -k regex:linear_ --launch-skip 2 --launch-count 1 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats \
      --section WarpStateStats --section LaunchStats --section InstructionStats \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      "$bench" >"$out/ncu-$tag.txt" 2>&1
    echo "ncu $tag rc=$?"
  fi
done
i=0
for v in "${variants[@]}"; do
  env $v timeout 120 "$bench" >"$out/bench-variant$i.log" 2>&1
  echo "variant$i [$v] rc=$?"
  grep -vE "^cublas" "$out/bench-variant$i.log" | grep -E "^[a-z]" | head -40
  i=$((i + 1))
done
echo "total $(( $(date +%s) - t0 ))s"
