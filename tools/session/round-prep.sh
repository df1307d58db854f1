#!/usr/bin/env bash
# Lead: snapshot main + the ready snippets into /work/main/.snap for a device round.
set -eu
cd /work/main
rm -rf .snap && mkdir .snap && git archive main | tar -x -C .snap && cp -r third_party .snap/
mkdir -p .snap/rounds
for f in gpu-results/ready-*.sh; do [ -f "$f" ] || continue; n=${f#gpu-results/ready-}; cp "$f" ".snap/rounds/$n"; done
git rev-parse --short main > .snap/SNAP_SHA
echo "snap of main $(cat .snap/SNAP_SHA): $(ls .snap/rounds | tr '\n' ' ')"; du -sh .snap
