"""Refits run in a worker process with a time and a memory budget (docs/design.md, 'Bounded
learning').

A refit is seconds to minutes of numpy and sklearn. In a thread of the gateway it holds the GIL
for long stretches, and every tenant's requests wait on the event loop behind it (an adversarial
refit stalled ``/healthz`` for 48 s and grew the process by 2 GB). Here each refit's CPU part
runs in a process of its own:

* forked from a **forkserver** that imported the fitting code once (so a job starts in
  milliseconds, and never from the gateway's threads, which a plain fork would copy mid-lock);
* at a lower CPU priority (``nice`` 10) and with one BLAS thread, so on a small machine the
  gateway's own work comes first;
* with an address-space limit of ``memory_mb`` over what the worker starts with
  (``RLIMIT_AS``: numpy raises ``MemoryError``, reported as the reason) and a CPU-time limit
  of the time budget (``RLIMIT_CPU``), behind the wall-clock budget the gateway enforces by
  killing the worker;
* the job's input is sent, and its result received, in threads: the loop never reads or
  writes the pipes (a worker at low priority on a busy machine may write its result in pieces
  seconds apart; a read on the loop once held every request that long).

A failure of any kind (over a budget, killed, an exception in the job) is a
:class:`RefitWorkerFailed` with the reason in words: the caller logs it and answers with it;
the gateway never goes down with its worker. At most ``workers`` jobs run at once per
:class:`RefitWorkers`; more wait their turn.
"""

from __future__ import annotations

import asyncio
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["RefitWorkerFailed", "RefitWorkers", "WorkerBudget"]

log = logging.getLogger("judgefuse.service.learning.refit_worker")

T = TypeVar("T")

PRELOAD = ["judgefuse.service.learning.refit", "judgefuse.fusion.stacking", "sklearn.linear_model"]
"""Imported once by the forkserver, so each worker starts ready (sklearn alone is ~1 s)."""


class RefitWorkerFailed(RuntimeError):
    """The job did not finish within its budgets, or raised: ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class WorkerBudget:
    time_s: float
    """Wall-clock seconds (and CPU seconds) a job may take."""
    memory_mb: int
    """Address space a job may add over what its worker starts with."""


_context: Any = None


def _forkserver() -> Any:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


class RefitWorkers:
    """Runs picklable module-level functions in budgeted worker processes (module docstring)."""

    def __init__(self, budget: WorkerBudget, *, workers: int = 1) -> None:
        self.budget = budget
        self.workers = workers
        self._slots: asyncio.Semaphore | None = None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker; its result, or :class:`RefitWorkerFailed`."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        async with self._slots:
            return await _run_once(fn, args, self.budget)


async def _run_once(fn: Callable[..., T], args: tuple[Any, ...], budget: WorkerBudget) -> T:
    context = _forkserver()
    job_out, job_in = context.Pipe(duplex=False)
    result_out, result_in = context.Pipe(duplex=False)
    process = context.Process(
        target=_work, args=(job_out, result_in, budget), name="judgefuse-refit", daemon=True
    )
    sending: asyncio.Task[None] | None = None
    receiving: asyncio.Future[tuple[str, Any]] | None = None
    try:
        # the first start waits for the forkserver's imports: never on the loop
        await asyncio.to_thread(process.start)
        job_out.close()
        result_in.close()
        sending = asyncio.create_task(asyncio.to_thread(_send, job_in, (fn, args)))
        # received in a thread too: the worker runs at a low priority and may write its result
        # in pieces far apart on a busy machine; a read on the loop would wait for them
        receiving = asyncio.ensure_future(asyncio.to_thread(_receive, result_out))
        try:
            status, payload = await asyncio.wait_for(asyncio.shield(receiving), timeout=budget.time_s)
        except TimeoutError:
            raise RefitWorkerFailed(
                f"over the time budget of {budget.time_s:g} s (refit_timeout_s): "
                "the refit worker was stopped"
            ) from None
        if status == "dead":
            await asyncio.to_thread(process.join, 5)
            raise RefitWorkerFailed(_death(process.exitcode, budget))
    finally:
        if process.is_alive():
            process.kill()
        # both threads end once the worker is gone (a broken pipe, an end of file)
        await asyncio.gather(*(t for t in (sending, receiving) if t is not None), return_exceptions=True)
        job_in.close()
        result_out.close()
        if process.pid is not None:
            await asyncio.to_thread(process.join, 10)
    if status != "ok":
        raise RefitWorkerFailed(str(payload))
    return payload


def _send(connection: multiprocessing.connection.Connection, job: Any) -> None:
    try:
        connection.send(job)
    except (BrokenPipeError, OSError):  # the worker died or was stopped: its exit says why
        pass


def _receive(connection: multiprocessing.connection.Connection) -> tuple[str, Any]:
    try:
        status, payload = connection.recv()
    except (EOFError, OSError):  # the worker died or was stopped
        return "dead", None
    return str(status), payload


def _death(exitcode: int | None, budget: WorkerBudget) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        if -exitcode == signal.SIGXCPU:
            return f"over the CPU budget of {budget.time_s:g} s (refit_timeout_s): the refit worker was stopped"
        if -exitcode == signal.SIGKILL:
            return (f"the refit worker was killed ({name}; out of memory? its budget is "
                    f"{budget.memory_mb} MB, refit_memory_mb)")
        return f"the refit worker died of {name}"
    return f"the refit worker exited ({exitcode}) without a result"


# ------------------------------------------------------------------------------ in the worker
def _vm_size() -> int:
    """The worker's address space in bytes (Linux ``/proc``; 0 when unknown)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _limit(budget: WorkerBudget) -> None:
    import resource

    try:
        os.nice(10)
    except OSError:
        pass
    size = _vm_size()
    if size:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + budget.memory_mb * 1024 * 1024
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    seconds = math.ceil(budget.time_s) + 1
    if hard == resource.RLIM_INFINITY or seconds < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, hard))


def _work(
    jobs: multiprocessing.connection.Connection, results: multiprocessing.connection.Connection,
    budget: WorkerBudget,
) -> None:
    """The worker: limits first, then the job; the outcome goes back as (status, payload)."""
    try:
        _limit(budget)
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        fn, args = jobs.recv()
        with threadpool_limits(1):
            result = fn(*args)
        results.send(("ok", result))
    except MemoryError:
        results.send(("memory", f"over the memory budget of {budget.memory_mb} MB (refit_memory_mb)"))
    except BaseException as exc:  # noqa: BLE001 - everything is reported, nothing escapes
        results.send(("error", f"the refit failed: {type(exc).__name__}: {exc}"))
    finally:
        results.close()
