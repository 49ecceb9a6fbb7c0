"""The dead-gateway run of issue 47: ``Client.judge_pairs`` over 10,000 pairs with the gateway
stopped after 100 verdicts. Before the circuit breaker each remaining pair waited out its own
retry deadline (120 s by default, about 41 h for 10,000 pairs at 8 in flight); with it the run
stops with one ``GatewayDown``. A rerun against a gateway on the same storage then finishes,
and the stub judges' call count shows whether any pair was judged twice.

Usage: ``python benchmarks/bench_client_breaker.py [--pairs 10000] [--kill-after 100]
[--concurrency 8] [--out benchmarks/results/client_breaker.txt]``

The gateway and its stub judges are the test suite's (``tests/jf_test_support.live_gateway``:
uvicorn + the app + SQLite, three stub judges) in a thread of this process. Printed: the time
from the gateway's stop to the ``GatewayDown`` (the figure the issue asks to be under 30 s),
the sends that found no gateway, the resume file's lines, the rerun's time, and the judge
calls of both runs against pairs x 3. The no-breaker time is the arithmetic of the default
retry policy (each pair left waits its 120 s deadline, ``concurrency`` at a time), not a run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]  # jf_test_support

from jf_test_support.live_gateway import API_KEY, live_gateway  # noqa: E402

from judgefuse.client import Client, GatewayDown, RetryPolicy  # noqa: E402


def pairs(n: int) -> Iterator[dict[str, str]]:
    for i in range(n):
        yield {"question": f"question {i}", "answer_a": f"a{i}", "answer_b": f"b{i}"}



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--kill-after", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        progress_file = folder / "run.jsonl"
        stack = contextlib.ExitStack()
        live = stack.enter_context(live_gateway(folder))
        client = Client(live.url, API_KEY)  # the defaults: RetryPolicy(), CircuitBreaker()
        first = 0
        killed_at = started = time.monotonic()
        error: GatewayDown | None = None
        try:
            for _result in client.judge_pairs(pairs(args.pairs), concurrency=args.concurrency,
                                             resume=progress_file, progress=False):
                first += 1
                if first == args.kill_after:
                    live.wait_until_quiet()
                    stack.close()
                    killed_at = time.monotonic()
        except GatewayDown as exc:
            error = exc
        stopped_after = time.monotonic() - killed_at
        breaker = client.last_breaker
        client.close()
        first_calls = live.judge_calls()
        assert breaker is not None
        file_lines = progress_file.read_text().splitlines()
        left = args.pairs - first
        policy = RetryPolicy()
        no_breaker_h = left * (policy.deadline_s or 0) / args.concurrency / 3600
        say(f"pairs {args.pairs:,}, gateway stopped after {first} verdicts, concurrency {args.concurrency}, "
            f"defaults: RetryPolicy(deadline_s={policy.deadline_s:g}), CircuitBreaker("
            f"failures={client.breaker.failures}, outage_s={client.breaker.outage_s:g})")
        say(f"first run: the gateway stopped {killed_at - started:.1f} s in; "
            f"GatewayDown {stopped_after * 1000:.0f} ms after that "
            f"(no breaker: about {no_breaker_h:.1f} h for the {left:,} pairs left)")
        say(f"  sends without an answer: {breaker.failed} (breaker: {breaker.policy.failures} in a row); "
            f"errors raised: {1 if error else 0}; resume file: {len(file_lines)} lines, "
            f"{sum(1 for line in file_lines if json.loads(line).get('verdict'))} with a verdict")
        say(f"  the error: {error}")
        rerun_started = time.monotonic()
        with live_gateway(folder) as again, Client(again.url, API_KEY) as rerun_client:
            rest = sum(1 for r in rerun_client.judge_pairs(pairs(args.pairs), concurrency=args.concurrency,
                                                            resume=progress_file, progress=False) if r.ok)
            second_calls = again.judge_calls()
        say(f"rerun: {rest:,} pairs judged in {time.monotonic() - rerun_started:.1f} s; "
            f"judge calls {first_calls:,} + {second_calls:,} = {first_calls + second_calls:,} "
            f"(pairs x 3 = {args.pairs * 3:,}: {'none judged twice' if first_calls + second_calls == args.pairs * 3 else 'MISMATCH'})")
        say(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
