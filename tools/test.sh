#!/usr/bin/env bash
# Build b12x and run every test: the C++ tests (ctest: CPU tests, and GPU tests, which skip with a
# message where no GPU is present) and the Python tests (pytest). Ends with one line
# "N passed, N failed, N skipped" and exits non-zero if anything failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${B12X_BUILD_DIR:-$root/build}
"$root/tools/build.sh" "$@" || { echo "0 passed, 1 failed"; exit 1; }

ctest_log=$(mktemp)
( cd "$build" && ctest --output-on-failure -j"${B12X_JOBS:-$(nproc)}" ) 2>&1 | tee "$ctest_log"
c_total=$(grep -Eo 'tests passed, [0-9]+ tests failed out of [0-9]+' "$ctest_log" | grep -Eo '[0-9]+$' || echo 0)
c_failed=$(grep -Eo '[0-9]+ tests failed out of' "$ctest_log" | grep -Eo '^[0-9]+' || echo 0)
# gtest_discover_tests reports GTEST_SKIP as "Skipped" (ctest >= 3.21 counts them as not run).
c_skipped=$(grep -Ec '\*\*\*Skipped|Not Run' "$ctest_log" || true)
c_passed=$(( ${c_total:-0} - ${c_failed:-0} - ${c_skipped:-0} ))

py_log=$(mktemp)
B12X_LIBRARY=${B12X_LIBRARY:-$build/libb12x.so} PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" \
  python3 -m pytest "$root/tests/python" -q -rs -p no:cacheprovider 2>&1 | tee "$py_log"
p_passed=$(grep -Eo '[0-9]+ passed' "$py_log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
p_failed=$(grep -Eo '[0-9]+ (failed|error)' "$py_log" | awk '{s+=$1} END {print s+0}')
p_skipped=$(grep -Eo '[0-9]+ skipped' "$py_log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
if ! grep -Eq '[0-9]+ (passed|failed|skipped|error)' "$py_log"; then p_failed=$(( p_failed + 1 )); fi

passed=$(( c_passed + p_passed ))
failed=$(( c_failed + p_failed ))
skipped=$(( c_skipped + p_skipped ))
echo "C++: ${c_passed} passed, ${c_failed} failed, ${c_skipped} skipped; Python: ${p_passed} passed, ${p_failed} failed, ${p_skipped} skipped"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
