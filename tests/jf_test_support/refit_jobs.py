"""Jobs for the refit worker tests (no tests here): module-level, so a worker process can
import them by name, as it imports the real refit's job."""

from __future__ import annotations

import os
import time


def worker_pid() -> int:
    return os.getpid()


def busy(seconds: float) -> str:
    """Hold a CPU (and the worker's GIL) for ``seconds``."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return f"spun {n}"


def allocate(megabytes: int) -> float:
    import numpy as np

    block = np.ones(megabytes * 1024 * 1024 // 8)
    return float(block.sum())


def fail() -> None:
    raise ValueError("a bad job")


def cpus_and_nice() -> tuple[list[int], int]:
    """The CPUs the worker may run on and its niceness."""
    return sorted(os.sched_getaffinity(0)), os.nice(0)
