#!/usr/bin/env bash
# Issue 26: /metrics scraped every second under /v1/judge at RATE/s (bench_gateway.py --only-scrape,
# section (h): 10,000 verdicts fused first, so each of 5 judges' vote-drift detectors holds 10,000
# votes), OLD (the monitors' snapshot computed on the event loop) vs NEW (in a worker thread,
# vote-drift reports reused up to monitoring.metrics_max_age_s), alternated PAIRS times, same minutes.
# OLD is `git archive $OLD` in a temp dir run with this bench file; NEW is this checkout.
# Output: metrics_scrape_ab.txt. Usage: RATE=60 PAIRS=2 OLD=dfea48d bash benchmarks/results/metrics_scrape_ab.sh
set -u
cd "$(dirname "$0")/../.."
RATE=${RATE:-60}; PAIRS=${PAIRS:-2}; OLD=${OLD:-dfea48d}
PY=$PWD/.venv/bin/python
old=$(mktemp -d); git archive "$OLD" | tar -x -C "$old"; cp benchmarks/bench_gateway.py "$old/benchmarks/bench_gateway_ab.py"
{
  echo "### $(date -u +%FT%TZ) NEW $(git rev-parse --short HEAD)+tree vs OLD $OLD; uptime: $(uptime)"
  echo "### command: RATE=$RATE PAIRS=$PAIRS OLD=$OLD bash benchmarks/results/metrics_scrape_ab.sh"
  for i in $(seq "$PAIRS"); do
    echo "### pair $i NEW $(date -u +%T); uptime: $(uptime)"
    JUDGEFUSE_SERVER__SHED_WAIT_S=0 $PY benchmarks/bench_gateway.py --only-scrape --scrape-rate "$RATE" --labels 0 2>&1
    echo "### pair $i OLD $(date -u +%T); uptime: $(uptime)"
    (cd "$old" && PYTHONPATH="$old" $PY benchmarks/bench_gateway_ab.py --only-scrape --scrape-rate "$RATE" --labels 0 2>&1)
  done
  echo "### end $(date -u +%FT%TZ); uptime: $(uptime)"
} > benchmarks/results/metrics_scrape_ab.txt
rm -rf "$old"
