#!/usr/bin/env bash
# The write path before and after the service redesign, side by side in one run:
# bench_gateway.py on cc48a29 (the last commit before it, checked out as a worktree) and on
# this tree, alternated three times, same venv, same flags. Output: redesign_before_after.txt.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
BEFORE=${BEFORE_TREE:-/tmp/judgefuse-before}
[ -d "$BEFORE" ] || git worktree add -q "$BEFORE" cc48a29
FLAGS="--seconds 4 --concurrency 32 64 --labels 2000"
for round in 1 2 3; do
  for side in before after; do
    if [ $side = before ]; then dir=$BEFORE; else dir=$ROOT; fi
    echo "=== round $round: $side ($(git -C "$dir" rev-parse --short HEAD))"
    (cd "$dir" && PYTHONPATH=$dir "$ROOT/.venv/bin/python" benchmarks/bench_gateway.py $FLAGS 2>&1 \
      | sed -n '/^summary/,$p')
  done
done
