#!/usr/bin/env bash
# Lead: unpack a round's results. Usage: round-post.sh N FILES_AT [FILES_AT_TESTS]
set -eu
n=$1; at=$2
cd /work/main/gpu-results
mkdir -p round$n && tar xzf "$at/round.tgz" -C round$n && cp "$at/summary.txt" round$n/
if [ $# -ge 3 ]; then mkdir -p round$n/tests && cp -r "$3"/* round$n/tests/ 2>/dev/null || true
  [ -f round$n/tests/logs.tar.gz ] && tar xzf round$n/tests/logs.tar.gz -C round$n/tests; fi
for s in /work/main/.snap/rounds/*.sh; do [ -f "$s" ] || continue; b=$(basename "$s" .sh)
  [ -f ready-$b.sh ] && cmp -s ready-$b.sh "$s" && mv ready-$b.sh ran-$b-r$n.sh; done
echo $n > ROUND
ls round$n
