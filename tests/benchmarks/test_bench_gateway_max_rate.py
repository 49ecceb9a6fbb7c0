"""``benchmarks/bench_gateway.py``'s closed-loop maximum against a real aiohttp server on
loopback: each concurrency is a point, the max is the best point without errors, and with
``recheck`` the best point's concurrency runs once more and is printed beside the max (which
stays the best single point)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from jf_test_support.loopback_app import serve_app

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_gateway as bg  # noqa: E402


@pytest.fixture
async def fan_out() -> AsyncIterator[tuple[str, list[int]]]:
    """A server answering as the bare fan-out does after 20 ms; it records how many requests
    were in flight when each arrived."""
    in_flight = [0]
    seen: list[int] = []

    async def judge(_request: web.Request) -> web.Response:
        in_flight[0] += 1
        seen.append(in_flight[0])
        try:
            await asyncio.sleep(0.02)
        finally:
            in_flight[0] -= 1
        return web.json_response({"slowest": 0.02})

    app = web.Application()
    app.router.add_post("/v1/judge", judge)
    async with serve_app(app) as base:
        yield base + "/v1/judge", seen


async def test_recheck_runs_the_best_point_again(fan_out: tuple[str, list[int]],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    url, seen = fan_out
    target = bg.Target("bare", url, pid=os.getpid())
    measured = await bg.max_rate(target, [1, 4], 0.6, bg.Measured("bare"), recheck=True)
    rates = [rate for _, rate, _ in measured.points]
    assert [c for c, _, _ in measured.points] == [1, 4]
    assert rates[1] > 2 * rates[0]  # 20 ms a request: four clients get about four times one's rate
    assert measured.max_rate == max(rates)
    assert measured.recheck is not None
    concurrency, again, errors, cpu_ms = measured.recheck
    assert (concurrency, errors) == (4, 0)
    assert 0.5 * measured.max_rate < again <= 1.5 * measured.max_rate
    assert cpu_ms > 0 and len(measured.point_cpu_ms) == 2
    # the recheck (the last ~100 requests: 0.6 s at 20 ms each, four at a time) ran at the best
    # point's concurrency, not another (the warm-up before the points runs eight)
    assert max(seen) == 8 and max(seen[-100:]) == 4
    bg.show_points(measured)
    out = capsys.readouterr().out
    assert f"concurrency    4 again: {again:7.1f}/s, errors 0" in out
    assert f"({bg.ratio(again, measured.max_rate)} of the max" in out


async def test_no_recheck_unless_asked(fan_out: tuple[str, list[int]]) -> None:
    url, _ = fan_out
    measured = await bg.max_rate(bg.Target("bare", url), [2], 0.3, bg.Measured("bare"))
    assert measured.recheck is None
    assert measured.point_cpu_ms == [0.0]  # no process given: no CPU figure
