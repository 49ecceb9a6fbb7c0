#!/usr/bin/env bash
# Issue 26 (speed under realistic load), every "What must be shown" figure in one run of
# bench_gateway.py: closed-loop maxima, open loop at 25/50/80% of each max and /v1/fuse at 150%
# (loop lag, where the time goes, pinned cores), the targets met/NOT met, (f) the loop's lag
# with the largest allowed refit running, (d) LiteLLM's proxy beside it (from a scratch venv:
#   python3 -m venv /tmp/litellm-proxy-venv
#   /tmp/litellm-proxy-venv/bin/pip install 'litellm[proxy]==1.108.7'
# LITELLM_PROXY_VENV points at another), (g) judgefuse serve --workers 1 and 2, and the summary.
# The machine's load average is printed at the start and the end. Output: open_loop.txt.
set -u
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
VENV=${LITELLM_PROXY_VENV:-/tmp/litellm-proxy-venv}
{
  echo "### $(date -u +%FT%TZ) $(git rev-parse --short HEAD); uptime: $(uptime)"
  echo "### command: LITELLM_LOCAL_MODEL_COST_MAP=True $PY benchmarks/bench_gateway.py --labels 0 --anchor litellm-proxy --litellm-venv $VENV --scaling 1 2 --refit-labels 2000"
  started=$(date +%s)
  LITELLM_LOCAL_MODEL_COST_MAP=True $PY benchmarks/bench_gateway.py --labels 0 --anchor litellm-proxy \
    --litellm-venv "$VENV" --scaling 1 2 --refit-labels 2000 2>&1
  echo "### wall $(( $(date +%s) - started )) s; $(date -u +%FT%TZ); uptime: $(uptime)"
} > benchmarks/results/open_loop.txt
