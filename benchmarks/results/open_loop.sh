#!/usr/bin/env bash
# Issue 26 (speed under realistic load): bench_gateway.py's open-loop levels, loop lag, time
# breakdown, the targets and the summary (LiteLLM's proxy not beside it: its extra is not
# installed in this venv); then the gateway
# as `judgefuse serve --workers 1` and `--workers 2` (not pinned: both use both cores).
# The machine's load average is printed at the start and the end of each run.
# Output: open_loop.txt (and open_loop_workers.txt). `open_loop.sh main` or `open_loop.sh
# workers` runs one part only (never two at once: they would share the cores).
set -u
PART=${1:-all}
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
[ "$PART" = workers ] || {
  echo "### $(date -u +%FT%TZ) $(git rev-parse --short HEAD); uptime: $(uptime)"
  LITELLM_LOCAL_MODEL_COST_MAP=True $PY benchmarks/bench_gateway.py --labels 0 --seconds 8 2>&1
} > benchmarks/results/open_loop.txt
[ "$PART" = main ] || {
  for n in 1 2; do
    echo "### $(date -u +%FT%TZ) gateway workers $n; uptime: $(uptime)"
    LITELLM_LOCAL_MODEL_COST_MAP=True $PY benchmarks/bench_gateway.py --gateway-workers $n --no-pin --labels 0 --seconds 5 \
      --concurrency 32 64 128 2>&1 | sed -n '/^cores/p;/^(a)/,/^(b)/p;/^summary/,$p'
  done
} > benchmarks/results/open_loop_workers.txt
