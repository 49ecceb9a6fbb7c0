"""The loop-lag sampler (judgefuse.service.kernel.loop_lag) on a real event loop: a loop kept
busy past capacity is overloaded and recovers when the work stops; one stall is not overload."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry, Histogram

from judgefuse.service.kernel.loop_lag import LoopLag


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def keep_late(lag: LoopLag, block, each_s: float, for_s: float) -> None:
    """Block the loop with ``block(each_s)`` again and again for ``for_s``, yielding between."""
    end = time.perf_counter() + for_s
    while time.perf_counter() < end:
        block(each_s)
        await asyncio.sleep(0)


async def test_a_loop_kept_busy_is_overloaded_and_recovers():
    histogram = Histogram("lag", "lag", registry=CollectorRegistry(), buckets=(0.001, 0.01, 0.1))
    lag = LoopLag(histogram, interval_s=0.005, window_s=0.05)
    lag.start()
    try:
        await asyncio.sleep(0.12)
        assert not lag.overloaded(0.01)
        await keep_late(lag, spin, 0.03, 0.3)
        assert lag.overloaded(0.01)
        await asyncio.sleep(0.15)  # idle: the next full window's lag is ~0
        assert not lag.overloaded(0.01)
        assert lag.worst_s >= 0.02 and lag.samples > 10
        count = next(x for x in histogram.collect()[0].samples if x.name == "lag_count")
        assert count.value == lag.samples
    finally:
        lag.stop()
    assert not lag.running


async def test_one_stall_is_not_overload():
    lag = LoopLag(interval_s=0.005, window_s=0.1)
    lag.start()
    try:
        await asyncio.sleep(0.05)
        spin(0.08)  # one long stall: one late timer, the rest of the window on time
        await asyncio.sleep(0.25)
        assert lag.worst_s >= 0.07
        assert not lag.overloaded(0.01)
    finally:
        lag.stop()
