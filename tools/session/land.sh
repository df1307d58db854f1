#!/usr/bin/env bash
# Land this worktree's commits on main: rebase the branch onto main, then move main to it with a
# compare-and-swap (git update-ref NEW OLD), retrying if another helper landed in between.
# Usage (from your worktree, everything you want landed committed): bash /work/land.sh
set -u
cd "$(git rev-parse --show-toplevel)"
for i in 1 2 3 4 5 6 7 8; do
  old=$(git rev-parse main)
  if ! git rebase -q --autostash main; then
    echo "REBASE CONFLICT: resolve (git status), git rebase --continue, then run land.sh again"; exit 1
  fi
  if git update-ref refs/heads/main HEAD "$old" 2>/dev/null; then
    echo "landed: main = $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-80))"; exit 0
  fi
  sleep 1
done
echo "could not land after 8 tries"; exit 1
