#!/usr/bin/env bash
# Issue 26, the refit under load: section (f) of bench_gateway.py alone (the /v1/judge closed-loop
# max, then open loop at half of it without and with the largest allowed refit, 2,000 labels of
# 13 judges x 16 signals, running back to back in the background), on the code before the refit
# isolation (OLD, default ae12f58: the gateway reads and pickles the records and the worker
# inherits the gateway's pinned core) and after it (NEW, default cb90d9c), each a clean export
# of its commit, alternately in the same minutes:
#   RATE=10 bash benchmarks/results/refit_isolation_ab.sh   # output: refit_isolation_ab.txt (overwritten)
# PAIRS=2 runs OLD NEW NEW OLD. The machine's load average is printed before each run.
set -u
cd "$(dirname "$0")/../.."
PY=$PWD/${PY:-.venv/bin/python}
OLD=${OLD:-ae12f58}
NEW=${NEW:-cb90d9c}
PAIRS=${PAIRS:-1}
RATE=${RATE:-0}  # requests/s for (f); 0: half of each run's own /v1/judge max (the rates then differ)
trees=$(mktemp -d /tmp/refit-ab-XXXX)
for side in OLD NEW; do
  mkdir "$trees/$side"
  git archive "${!side}" | tar -x -C "$trees/$side"
  cp benchmarks/bench_gateway.py "$trees/$side/benchmarks/"  # the same benchmark (--only-refit) on both
done
run() {  # $1: OLD or NEW
  echo "### $1 (${!1}) $(date -u +%FT%TZ); uptime: $(uptime)"
  ( cd "$trees/$1" && PYTHONPATH="$trees/$1" "$PY" benchmarks/bench_gateway.py --labels 0 --only-refit --refit-rate "$RATE" \
      --refit-labels 2000 --seconds 15 2>&1 )
}
{
  echo "### command: RATE=$RATE PAIRS=$PAIRS bash benchmarks/results/refit_isolation_ab.sh: bench_gateway.py --labels 0 --only-refit --refit-rate $RATE --refit-labels 2000 --seconds 15 on OLD=$OLD and NEW=$NEW"
  order="OLD NEW"
  [ "$PAIRS" -ge 2 ] && order="OLD NEW NEW OLD"
  for side in $order; do run "$side"; done
  echo "### end $(date -u +%FT%TZ); uptime: $(uptime)"
} > benchmarks/results/refit_isolation_ab.txt
rm -rf "$trees"
