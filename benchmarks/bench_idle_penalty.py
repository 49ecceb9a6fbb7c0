"""What this machine charges for idling: the same Python work back to back vs with idle gaps.

Usage: ``taskset -c 1 python benchmarks/bench_idle_penalty.py [--calls 400]``

Why: the gateway's CPU per request rises as its arrival rate falls (``bench_cpu_by_rate.py``:
5.2-6.0 ms a request at 50/s, 3.3 ms at 300/s). Little of its code runs only at low rates. This
script separates the machine from the gateway. It times one fixed piece of work (three JSON
round trips of a 2.4 KB verdict body, as the store and the response handle one) by its thread's
CPU: back to back, then with a sleep of 1, 5 or 20 ms after each call. On a machine that
penalizes idling (a virtual CPU halted and resumed, caches refilled, a lower clock after a
pause), the same work costs more CPU the longer the pauses. The order is repeated so a drift of
the machine shows.
"""

from __future__ import annotations

import argparse
import json
import time

BODY = json.dumps({
    "id": "bench-0", "tenant": "default", "panel": "bench", "created_at": 1.8e9,
    "verdict": {"choice": "A", "confidence": 0.85, "p_a": 0.85, "method": "mean_probability",
                "votes": [{"judge": f"judge{i}", "mode": "sc", "choice": "A", "confidence": 0.85,
                           "p_a": 0.85, "tie": False, "explanation": "4 is right", "samples": [],
                           "signals": {}, "raw": '{"selected_output": "Output (a)", '
                           '"confidence_score": 85, "explanation": "4 is right"}',
                           "latency_s": 0.1009, "prompt_tokens": 12, "completion_tokens": 1,
                           "calls": 1, "cost_usd": 0.0, "error": None, "notes": []}
                          for i in range(5)],
                "n_valid": 5, "n_invalid": 0, "route": "auto_accept", "threshold": 0.8,
                "timings": {"judges_s": 0.0521, "fuse_s": 0.0001, "store_s": 0.0009}},
    "item": {"id": "bench-0", "question": "2+2?", "answer_a": "4", "answer_b": "5"},
    "review": {"stratum": "none", "inclusion_probability": 0.0, "reason": "auto_accept"},
})
"""About the size and shape of a stored verdict of the gateway benchmark (5 SC votes)."""


def work() -> None:
    for _ in range(3):
        json.dumps(json.loads(BODY))


def cpu_us_a_call(calls: int, gap_s: float) -> float:
    started = time.thread_time()
    for _ in range(calls):
        work()
        if gap_s:
            time.sleep(gap_s)
    return (time.thread_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    print(f"{len(BODY):,} B body, 3 JSON round trips a call, {args.calls} calls a line")
    for gap_s in (0.0, 0.001, 0.005, 0.02, 0.0, 0.02, 0.005, 0.001, 0.0):
        print(f"    idle gap {gap_s * 1e3:4.0f} ms after each call: "
              f"{cpu_us_a_call(args.calls, gap_s):6.0f} us of CPU a call", flush=True)


if __name__ == "__main__":
    main()
