#!/usr/bin/env bash
# One device round for several parallel experiments (the lead's driver on the lent GPU machine):
# build (tools/gpu-check.sh's build stage), run every snippet <dir>/<name>.sh with B = the build
# directory and L = its own log directory (bounded by a timeout), then the gpu-check stages given
# (tests, sanitize, python, bench). Everything comes back as $OUT/round.tgz plus $OUT/summary.txt.
#
#   tools/gpu-round.sh SNIPPET_DIR [STAGES] [AREAS]     e.g. rounds/ tests,sanitize "gemm moe"
#
# Snippet contract (gpu-results/PROTOCOL.md): bash, run from the repository root, may read $B and
# write under $L; its stdout/stderr go to $L/run.log.
set -u
snips=${1:?usage: tools/gpu-round.sh SNIPPET_DIR [STAGES] [AREAS]}
stages=${2:-tests}
areas=${3:-formats gemm quantize embedding moe attention integration}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
export B12X_GPU_BUILD=${B12X_GPU_BUILD:-../build-gpu}
export B="$(cd "$root" && mkdir -p "$B12X_GPU_BUILD" && cd "$B12X_GPU_BUILD" && pwd)"
res=$(mktemp -d)
OUT=$res/check bash tools/gpu-check.sh --stages build >/dev/null 2>&1
cat "$res/check/summary.txt" >"$out/summary.txt"
mkdir -p "$res/build" && tar xzf "$res/check/logs.tar.gz" -C "$res/build" 2>/dev/null
for s in "$snips"/*.sh; do
  [ -f "$s" ] || continue
  n=$(basename "$s" .sh)
  export L=$res/$n
  mkdir -p "$L"
  t=$(date +%s)
  timeout "${B12X_SNIPPET_TIMEOUT:-150}" bash "$s" >"$L/run.log" 2>&1
  echo "snippet $n rc=$? in $(( $(date +%s) - t ))s" | tee -a "$out/summary.txt"
done
if [ -n "$stages" ] && [ "$stages" != none ]; then
  OUT=$res/check bash tools/gpu-check.sh --stages "$stages" --areas "$areas" >/dev/null 2>&1
  grep -v '^== \|^gpu: ' "$res/check/summary.txt" >>"$out/summary.txt"
  mkdir -p "$res/check/logs" && tar xzf "$res/check/logs.tar.gz" -C "$res/check/logs" 2>/dev/null
  rm -f "$res/check/logs.tar.gz" "$res/check/summary.txt"
fi
rm -f "$res/check/logs.tar.gz"
tar czf "$out/round.tgz" -C "$res" .
exit 0
