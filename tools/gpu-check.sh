#!/usr/bin/env bash
# The GPU check: build for the device's architecture with all cores, run the GPU tests area by
# area, compute-sanitizer on the *GpuSanitize* subset, the Python tests (torch + GPU parts), and
# the benchmarks. Logs and a summary go to $OUT (default ./gpu-out): summary.txt plus logs.tar.gz.
#
#   tools/gpu-check.sh [--stages build,tests,sanitize,python,bench] [--areas "gemm moe ..."]
#                      [--arch 90a] [--test-timeout 300] [--filter GTEST_FILTER]
#
# GPU test suites are named <Area>Gpu* (FormatsGpu, GemmGpu, QuantizeGpu, EmbeddingGpu, MoeGpu,
# AttentionGpu, IntegrationGpu: warm-up/freeze and checkpoint round trips); each area's output is
# logs/<area>.log. Without a GPU every test skips.
set -u
stages="build,tests,sanitize,python,bench"  # also: archs (time a 90a;120a;121a build),
                                             # sm89 (the library's device code for sm_89),
                                             # tp (two-GPU tensor-parallel check, >= 2 GPUs)
areas="formats gemm quantize embedding moe attention integration"
arch="90a"
test_timeout=300
extra_filter=""
while [ $# -gt 0 ]; do
  case "$1" in
    --stages) stages="$2"; shift 2 ;;
    --areas) areas="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --test-timeout) test_timeout="$2"; shift 2 ;;
    --filter) extra_filter="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
has() { case ",$stages," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
logs=$(mktemp -d)
mkdir -p "$logs"
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
build=${B12X_GPU_BUILD:-build-gpu}  # e.g. ../build-gpu: outside a carried snapshot, so it survives
jobs=$(nproc)
t0=$(date +%s)

say "== b12x gpu-check ${B12X_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)} $(date -u +%FT%TZ) stages=$stages"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  >"$logs/nvidia-smi.txt" 2>&1 && say "gpu: $(tail -1 "$logs/nvidia-smi.txt")"

if has build; then
  tb=$(date +%s)
  # B12X_AREAS (env, e.g. "gemm;reference") restricts the build for a quick single-area round.
  cmake -S . -B $build -G Ninja -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=Release \
    -DB12X_AREAS="${B12X_AREAS:-}" \
    >"$logs/configure.log" 2>&1 || say "configure FAILED (see logs/configure.log)"
  cmake --build $build -j"$jobs" -- -k 0 >"$logs/build.log" 2>&1
  rc=$?
  say "build rc=$rc in $(( $(date +%s) - tb ))s"
  if [ $rc -ne 0 ]; then
    grep -E "error|FAILED" "$logs/build.log" | head -30 | tee -a "$summary"
  fi
fi

if has sm89; then
  ts=$(date +%s)
  say "$(tools/compile-sm89.sh "$build" "$logs/sm89" "$jobs" 2>&1 | tail -21) in $(( $(date +%s) - ts ))s"
fi

if has archs; then
  # What CI does on its 2 cores: all three architectures. Reports wall and CPU time so the CI
  # budget can be estimated (CPU seconds / 2), and the SM12x shared-memory usage from ptxas.
  ta=$(date +%s)
  TIMEFORMAT='real %R s, user %U s, sys %S s'
  { time { cmake -S . -B build-archs -G Ninja -DCMAKE_CUDA_ARCHITECTURES="90a;120a;121a" \
             -DCMAKE_BUILD_TYPE=Release >/dev/null &&
           cmake --build build-archs -j"$jobs" -- -k 0; }; } >"$logs/archs.log" 2>&1
  say "3-arch build: $(tail -1 "$logs/archs.log") (wall $(( $(date +%s) - ta ))s)"
  grep -E "error" "$logs/archs.log" | head -10 | tee -a "$summary"
fi

gtest=$build/tests/b12x_gpu_tests
cap() { echo "$1" | sed 's/^./\U&/'; }

# One test process per area. B12X_GPU_TESTS_PARALLEL=1 runs the areas' processes at the same time
# (most of a GPU test's wall time is its CPU reference on one core; the device has 16): the final
# round's wall time then follows the slowest area, not the sum. Results are reported in area order
# either way; the tests check values and which kernel ran, never timings.
run_area() {
  local a=$1 A f
  A=$(cap "$a")
  f="${A}Gpu*"
  [ -n "$extra_filter" ] && f="$f:$extra_filter"
  local ta=$(date +%s)
  timeout "$test_timeout" "$gtest" --gtest_filter="$f" --gtest_color=no >"$logs/$a.log" 2>&1
  echo "$? $(( $(date +%s) - ta ))" >"$logs/$a.rc"
}
if has tests && [ -x "$gtest" ]; then
  for a in $areas; do
    if [ "${B12X_GPU_TESTS_PARALLEL:-0}" = 1 ]; then run_area "$a" & else run_area "$a"; fi
  done
  wait
  for a in $areas; do
    read -r rc secs <"$logs/$a.rc"
    pass=$(grep -c '^\[       OK \]' "$logs/$a.log")
    fail=$(grep -c '^\[  FAILED  \].*(' "$logs/$a.log")
    skip=$(grep -c '^\[  SKIPPED \]' "$logs/$a.log")
    say "tests $a: rc=$rc passed=$pass failed=$fail skipped=$skip in ${secs}s"
    grep '^\[  FAILED  \].*(' "$logs/$a.log" | head -15 | sed 's/^/    /' | tee -a "$summary"
  done
  rm -f "$logs"/*.rc
fi

if has sanitize && [ -x "$gtest" ]; then
  ts=$(date +%s)
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
    "$gtest" --gtest_filter='*GpuSanitize*' --gtest_color=no >"$logs/sanitizer-memcheck.log" 2>&1
  rc=$?
  say "compute-sanitizer memcheck rc=$rc in $(( $(date +%s) - ts ))s ($(grep -c '^\[       OK \]' "$logs/sanitizer-memcheck.log") tests; $(grep -E 'ERROR SUMMARY' "$logs/sanitizer-memcheck.log" | tail -1))"
  timeout 300 compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 \
    "$gtest" --gtest_filter='*GpuSanitize*' --gtest_color=no >"$logs/sanitizer-racecheck.log" 2>&1
  rc=$?
  say "compute-sanitizer racecheck rc=$rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitizer-racecheck.log" | tail -1))"
fi

if has python; then
  tp=$(date +%s)
  B12X_LIBRARY=$root/$build/libb12x.so PYTHONPATH=$root/python timeout 400 \
    python3 -m pytest tests/python -q -rs -p no:cacheprovider >"$logs/python.log" 2>&1
  say "python rc=$? $(tail -1 "$logs/python.log") in $(( $(date +%s) - tp ))s"
fi

if has tp; then
  # Issue 7: one process per GPU, NCCL all-reduce through torch.distributed, vs the one-GPU
  # layer. NVLink multicast stays off (required on the shared multi-GPU hosts).
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "$ngpu" -ge 2 ]; then
    tt=$(date +%s)
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
      B12X_LIBRARY=$root/$build/libb12x.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1 \
      timeout 400 python3 tools/tp_check.py --json "$logs/tp_check.json" >"$logs/tp_check.log" 2>&1
    say "tp_check rc=$? in $(( $(date +%s) - tt ))s"
    grep -E '^(fp8_block_mlp|nvfp4_mlp|moe_)' "$logs/tp_check.log" | sed 's/^/    /' | tee -a "$summary"
  else
    say "tp_check skipped: $ngpu GPU(s) visible, needs 2"
  fi
fi

if has bench; then
  export B12X_BENCH_OUT=$logs/bench-results
  mkdir -p "$B12X_BENCH_OUT"
  export B12X_GIT_COMMIT=${B12X_GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
  for b in $build/bench/bench_*; do
    [ -x "$b" ] || continue
    n=$(basename "$b")
    area=${n#bench_}
    case " $areas " in *" $area "*) ;; *) continue ;; esac
    tb=$(date +%s)
    timeout 75 "$b" >"$logs/$n.log" 2>&1
    say "bench $n rc=$? in $(( $(date +%s) - tb ))s"
  done
  for b in bench/bench_*.py; do
    [ -f "$b" ] || continue
    n=$(basename "$b" .py)
    area=${n#bench_}
    case " $areas " in *" $area "*) ;; *) continue ;; esac
    tb=$(date +%s)
    B12X_LIBRARY=$root/$build/libb12x.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1 \
      timeout 75 python3 "$b" >"$logs/$n.log" 2>&1
    say "bench $n rc=$? in $(( $(date +%s) - tb ))s"
  done
fi

say "total $(( $(date +%s) - t0 ))s"
tar czf "$out/logs.tar.gz" -C "$logs" . 2>/dev/null
exit 0
