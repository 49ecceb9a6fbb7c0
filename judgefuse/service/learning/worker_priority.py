"""Where refit processes run: the lowest priority, off the gateway's CPUs, from their first import.

Refit workers fork from a forkserver (:mod:`.refit_worker`) that imports the fitting code once.
That server is started by the gateway on its first refit, and a started process inherits its
parent's priority and CPU affinity: the forkserver spent its first seconds importing scipy and
sklearn at the gateway's priority on the gateway's own CPU, and each worker unpickled its job
(more imports) there before its own limits moved it. Under ``/v1/judge`` at 50% of its max with
the gateway pinned to one core (``bench_gateway.py --only-refit``), ``ps`` showed the
forkserver at ~50% of that core for its first ~10 s and a new worker at ~94% of it before it
moved: the loop's lag rose to p50 <= 20 ms and latency to p50 ~200 ms while a refit ran.

So the forkserver's first preload is :mod:`.forkserver_first`, which calls :func:`step_back`
for the forkserver itself before the heavy imports that follow it; every worker forked from it
starts that way too, and applies the same again to itself (:mod:`.refit_worker`). Importing this
module does nothing by itself.

**The level is an environment variable, not a setting** (:data:`NICE_VARIABLE`, default
:data:`WORKER_NICE`): the forkserver reads it while it starts, before any settings exist in
that process, and it inherits its environment from the gateway. Lower it where nothing else
needs the CPU more than a refit does, or where the gateway shares its host with steady CPU
load: beside two busy loops at ``nice`` 0 on two cores, a worker at 19 got ~1% of a core, and
importing the fitting code alone took ~7 minutes (a 22 s test ran past its 300 s timeout). The
test suite runs its workers at 2 for that reason (``tests/conftest.py``). A process may raise
its own ``nice`` but not lower it: a level below the gateway's own is refused by the system
and the worker stays at the gateway's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from judgefuse.errors import JudgefuseError

__all__ = [
    "NICE_VARIABLE", "WORKER_NICE", "InvalidWorkerNice", "leave_serving_cpus", "lowest_priority",
    "step_back", "worker_nice",
]

NICE_VARIABLE = "JUDGEFUSE_REFIT_NICE"
"""The environment variable that sets the workers' ``nice`` (0-19; unset: :data:`WORKER_NICE`)."""

WORKER_NICE = 19
"""The workers' default ``nice``: the lowest. The worker leaves the gateway's CPU for the others, where
the judges (the benchmark's stub) and the clients run, and there it competes with them: in one
run of ``bench_gateway.py --only-refit`` at ``nice`` 10 (``/v1/judge`` at 60/s, a 2,000-label
refit, load ~11) the judge calls themselves slowed while the refit ran (slowest call p50 68 ->
85 ms, p99 164 -> 350 ms) and the loop's lag did not move. At 19 the gateway's side of the core
comes first whenever it wants it. Progress is kept (19 still gets a share, unlike
``SCHED_IDLE``), so on a saturated host a refit ends late (178 s vs 63 s at 10 in the same
quarter hour, load 10-13) rather than never; the budget is ``learning.refit_timeout_s``."""


def leave_serving_cpus(serving_pid: int) -> None:
    """Run on every CPU this process may use except those the serving process is pinned to
    (all of them when it is not pinned, or when nothing else is left)."""
    try:
        serving = os.sched_getaffinity(serving_pid)
        everything = set(range(os.cpu_count() or 1))
        others = everything - serving
        # the kernel keeps only the CPUs this process's cpuset allows; none of them: EINVAL
        os.sched_setaffinity(0, others if serving != everything and others else everything)
    except (AttributeError, OSError):  # not Linux, the server is gone, or only its CPUs are allowed
        pass


class InvalidWorkerNice(JudgefuseError, ValueError):
    """:data:`NICE_VARIABLE` is set to something other than a whole number from 0 to 19."""


def worker_nice(environ: Mapping[str, str] = os.environ) -> int:
    """The workers' ``nice``: :data:`NICE_VARIABLE` when set, else :data:`WORKER_NICE`. The
    gateway calls it when it starts, so a bad value stops the start with this message rather
    than a refit later."""
    raw = environ.get(NICE_VARIABLE, "").strip()
    if not raw:
        return WORKER_NICE
    if not (raw.isascii() and raw.isdigit()) or not 0 <= int(raw) <= 19:
        raise InvalidWorkerNice(
            f"{NICE_VARIABLE}={raw!r}: the refit workers' nice level is a whole number from 0 "
            f"to 19 (unset: {WORKER_NICE}, the lowest priority)"
        )
    return int(raw)


def lowest_priority() -> None:
    """This process at :func:`worker_nice` (unchanged where the system refuses, or the
    variable is invalid: the gateway refused that value when it started)."""
    try:
        os.nice(worker_nice() - os.nice(0))
    except (OSError, InvalidWorkerNice):
        pass


def step_back(serving_pid: int) -> None:
    """This process at :func:`worker_nice`, off the CPUs ``serving_pid`` is pinned to."""
    lowest_priority()
    leave_serving_cpus(serving_pid)

