#!/usr/bin/env bash
# Issue 26: /v1/fuse open loop at 50% and 150% of MAX/s (bench_gateway.py --only-fuse --fuse-max MAX)
# with server.shed_wait_s at each of WAITS (0: the wait-for-the-loop gate off, as before it),
# alternated PAIRS times in the same minutes. Output: fuse_wait_ab.txt.
# Usage: MAX=600 PAIRS=2 WAITS="0.05 0 0.02" bash benchmarks/results/fuse_wait_ab.sh
# (MAX: the closed-loop max of /v1/fuse measured on the machine, e.g. by --only-fuse alone)
set -u
cd "$(dirname "$0")/../.."
MAX=${MAX:-600}; PAIRS=${PAIRS:-2}; WAITS=${WAITS:-"0.05 0 0.02"}
{
  echo "### $(date -u +%FT%TZ) $(git rev-parse --short HEAD); uptime: $(uptime)"
  echo "### command: MAX=$MAX PAIRS=$PAIRS WAITS=\"$WAITS\" bash benchmarks/results/fuse_wait_ab.sh"
  for i in $(seq "$PAIRS"); do
    for w in $WAITS; do
      echo "### pair $i shed_wait_s=$w $(date -u +%T); uptime: $(uptime)"
      JUDGEFUSE_SERVER__SHED_WAIT_S=$w .venv/bin/python benchmarks/bench_gateway.py --only-fuse --fuse-max "$MAX" --labels 0 2>&1
    done
  done
  echo "### end $(date -u +%FT%TZ); uptime: $(uptime)"
} > benchmarks/results/fuse_wait_ab.txt
