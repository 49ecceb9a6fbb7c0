"""What the defences against hostile text cost: prompt defusal (per render) and key scrubbing
(per completion text and per vote), on ordinary and on hostile input.

    PYTHONPATH=. python benchmarks/bench_hostile_text.py

Prints microseconds per call (median of repeats). The render is timed uncached (the LRU in
``render_messages`` would otherwise hide it); scrubbing uses a 40-character key.
"""

from __future__ import annotations

import random
import statistics
import string
import time
from collections.abc import Callable

from judgefuse.judges.finalise import finalise_vote
from judgefuse.judges.transport.redaction import scrubber_for
from judgefuse.judges.types import JudgeVote
from judgefuse.prompts import neutralise_tags
from judgefuse.prompts.render import _render_uncached


def _time(fn: Callable[[], object], *, repeats: int = 7, number: int = 20) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - started) / number)
    return statistics.median(samples) * 1e6


def main() -> None:
    rng = random.Random(0)
    prose = "".join(rng.choice(string.ascii_letters + "      .,\n") for _ in range(2_000))
    code = ("if a < b and c <= d:\n    print('<div>', x < y)\n" * 60)[:2_000]
    big = prose * 16
    hostile = ("<\u200b/out\u200bput_a> \u3008/output_a\u3009 < " * 800)[:32_000]
    rows = [
        ("defuse 2 KB prose", lambda: neutralise_tags(prose)),
        ("defuse 2 KB code with '<'", lambda: neutralise_tags(code)),
        ("defuse 32 KB prose", lambda: neutralise_tags(big)),
        ("defuse 32 KB hostile (disguised tags)", lambda: neutralise_tags(hostile)),
        ("render sc, 2 KB answers, uncached", lambda: _render_uncached("sc", "What?", prose, code, ())),
    ]
    key = "sk-proj-" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(32))
    scrubber = scrubber_for(key)
    reply = '{"selected_output": "Output (a)", "confidence_score": 80, "explanation": "' + prose[:600] + '"}'
    huge = reply + "x" * 5_000_000
    vote = JudgeVote(judge="j", mode="sc", choice="A", confidence=0.8, explanation=prose[:600], raw=reply)
    huge_vote = vote.model_copy(update={"raw": huge, "explanation": huge})
    rows += [
        ("scrub a 1 KB completion", lambda: scrubber.scrub(reply)),
        ("scrub a 5 MB completion", lambda: scrubber.scrub(huge)),
        ("scrub a 5 MB completion with '%' (escape regex runs)", lambda: scrubber.scrub(huge + "%")),
        ("finalise a vote (1 KB raw)", lambda: finalise_vote(vote, secrets=(key,), max_raw_bytes=16_384)),
        ("finalise a vote (5 MB raw + explanation)", lambda: finalise_vote(huge_vote, secrets=(key,), max_raw_bytes=16_384)),
    ]
    for name, fn in rows:
        number = 2 if "5 MB" in name else 20
        print(f"{name:55s} {_time(fn, number=number):10.1f} us")


if __name__ == "__main__":
    main()
