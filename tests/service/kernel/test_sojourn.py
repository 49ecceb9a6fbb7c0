"""The in-app time tracker (judgefuse.service.kernel.sojourn) on a fake clock: a window
whose every verdict took longer than the target is a queue, one slow verdict is not, a window
with too few verdicts says nothing, and a silence longer than a window forgets."""

from __future__ import annotations

import pytest

from judgefuse.service.kernel.sojourn import Sojourn


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


STEP = 1 / 64  # exact in binary: 8 verdicts a 0.125 s window, no rounding at the edges


def feed(s: Sojourn, clock: Clock, values: list[float], step: float = STEP) -> None:
    for v in values:
        s.observe(v)
        clock.now += step


def test_every_verdict_slow_is_a_queue_one_slow_is_not():
    clock = Clock()
    s = Sojourn(window_s=0.125, min_samples=4, clock=clock)
    assert not s.overloaded(0.025)
    feed(s, clock, [0.03, 0.2, 0.05, 0.04, 0.06, 0.09, 0.03, 0.05, 0.04])
    assert s.recent_min_s() == pytest.approx(0.03)
    assert s.overloaded(0.025) and not s.overloaded(0.05)
    feed(s, clock, [0.5, 0.002, 0.4, 0.3, 0.6, 0.5, 0.4, 0.3])  # one fast one in the window
    assert s.recent_min_s() == pytest.approx(0.002)
    assert not s.overloaded(0.025)
    assert not s.overloaded(0.0)  # a target of 0 turns the gate off


def test_too_few_verdicts_and_silence_say_nothing():
    clock = Clock()
    s = Sojourn(window_s=0.125, min_samples=4, clock=clock)
    feed(s, clock, [0.5, 0.5, 0.5], step=0.03125)  # three verdicts in the first window
    clock.now = 0.125
    s.observe(0.5)
    assert not s.overloaded(0.025)  # the closed window had fewer than 4
    feed(s, clock, [0.5] * 9)
    assert s.overloaded(0.025)
    clock.now += 0.5  # nothing finished for longer than a window
    assert s.recent_min_s() == 0 and not s.overloaded(0.025)


def test_arguments_checked():
    with pytest.raises(ValueError):
        Sojourn(window_s=0)
    with pytest.raises(ValueError):
        Sojourn(min_samples=0)
