"""Refits run in a worker process with a time and a memory budget (docs/design.md, 'Bounded
learning').

A refit is seconds to minutes of numpy and sklearn. In a thread of the gateway it holds the GIL
for long stretches, and every tenant's requests wait on the event loop behind it (an adversarial
refit stalled ``/healthz`` for 48 s and grew the process by 2 GB). Here each refit's CPU part
runs in a process of its own:

* forked from a **forkserver** that imported the fitting code once (so a job starts in
  milliseconds, and never from the gateway's threads, which a plain fork would copy mid-lock);
* at the lowest CPU priority (:data:`WORKER_NICE`, or ``JUDGEFUSE_REFIT_NICE``: :mod:`.worker_priority`) and with one BLAS thread, so on a small
  machine the gateway's own work, and whatever else shares the cores, comes first;
* with an address-space limit of ``memory_mb`` over what the worker starts with
  (``RLIMIT_AS``: numpy raises ``MemoryError``, reported as the reason) and a CPU-time limit
  of the time budget (``RLIMIT_CPU``), behind the wall-clock budget the gateway enforces by
  killing the worker;
* on every CPU it may use except the one the serving process is pinned to (when that process
  is pinned to fewer CPUs than there are): a worker inherits its parent's CPU affinity, so a
  gateway pinned to one core would share that core with its own refit (loop lag p99 250 ms);
* the job's input is sent, and its result received, in threads: the loop never reads or
  writes the pipes (a worker at low priority on a busy machine may write its result in pieces
  seconds apart; a read on the loop would hold every request that long).

A job is a picklable module-level function, or a generator function that stops once or more to
ask the gateway something (:meth:`RefitWorkers.session`): a refit reads its labels in the worker,
yields the label set's digest, and fits only if the gateway answers that no one else has
(:mod:`judgefuse.service.learning.refit_job`).

A failure of any kind (over a budget, killed, an exception in the job) is a
:class:`RefitWorkerFailed` with the reason in words: the caller logs it and answers with it;
the gateway never goes down with its worker. At most ``workers`` jobs run at once per
:class:`RefitWorkers`; more wait their turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from judgefuse.errors import JudgefuseError
from judgefuse.service.learning.worker_priority import WORKER_NICE, leave_serving_cpus, lowest_priority

__all__ = ["WORKER_NICE", "RefitWorkerFailed", "RefitWorkers", "WorkerBudget", "WorkerJob"]

log = logging.getLogger("judgefuse.service.learning.refit_worker")

T = TypeVar("T")

PRELOAD = ["judgefuse.service.learning.forkserver_first", "judgefuse.service.learning.refit",
           "judgefuse.fusion.stacking", "sklearn.linear_model"]
"""Imported once by the forkserver, so each worker starts ready (sklearn alone is ~1 s); the
first entry steps the forkserver back before the others (:mod:`.forkserver_first`)."""


class RefitWorkerFailed(JudgefuseError, RuntimeError):
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
        async with self.session(fn, *args) as job:
            return await job.result()

    @contextlib.asynccontextmanager
    async def session(self, fn: Callable[..., Any], *args: Any) -> AsyncIterator[WorkerJob]:
        """``fn(*args)`` started in a worker (it holds one of the ``workers`` slots until the
        block ends; the worker is stopped then if it still runs). With a generator function,
        :meth:`WorkerJob.question` is what it yields, :meth:`WorkerJob.result` sends the answer
        and waits for what it returns."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        async with self._slots:
            job = WorkerJob(fn, args, self.budget)
            try:
                await job.start()
                yield job
            finally:
                await job.stop()


_NO_ANSWER: Any = object()


class WorkerJob:
    """One job in one worker process: the time budget counts from its start, across every wait
    for the worker (not the gateway's own time between a question and its answer)."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], budget: WorkerBudget) -> None:
        context = _forkserver()
        self.budget = budget
        self._job_out, self._job_in = context.Pipe(duplex=False)
        self._result_out, self._result_in = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_work, args=(self._job_out, self._result_in, budget), name="judgefuse-refit", daemon=True
        )
        self._job = (fn, args, os.getpid())
        self._left = budget.time_s
        self._threads: list[asyncio.Future[Any]] = []

    async def start(self) -> None:
        # the first start waits for the forkserver's imports: never on the loop
        await asyncio.to_thread(self._process.start)
        self._job_out.close()
        self._result_in.close()
        self._threads.append(asyncio.ensure_future(asyncio.to_thread(_send, self._job_in, self._job)))

    async def _next(self) -> tuple[str, Any]:
        """The worker's next message, within what is left of the time budget."""
        # received in a thread: the worker runs at a low priority and may write its message in
        # pieces far apart on a busy machine; a read on the loop would wait for them
        receiving = asyncio.ensure_future(asyncio.to_thread(_receive, self._result_out))
        self._threads.append(receiving)
        began = time.monotonic()
        try:
            status, payload = await asyncio.wait_for(asyncio.shield(receiving), timeout=max(self._left, 0.0))
        except TimeoutError:
            raise RefitWorkerFailed(
                f"over the time budget of {self.budget.time_s:g} s (refit_timeout_s): "
                "the refit worker was stopped"
            ) from None
        finally:
            self._left -= time.monotonic() - began
        if status == "dead":
            await asyncio.to_thread(self._process.join, 5)
            raise RefitWorkerFailed(_death(self._process.exitcode, self.budget))
        if status not in ("ok", "ask"):
            raise RefitWorkerFailed(str(payload))
        return status, payload

    async def question(self) -> Any:
        """What a generator job yielded (:class:`RefitWorkerFailed` if it failed first)."""
        status, payload = await self._next()
        if status != "ask":
            raise RefitWorkerFailed("internal error: the refit job returned without asking")
        return payload

    async def result(self, answer: Any = _NO_ANSWER) -> Any:
        """The job's result; ``answer``: sent first, the reply to its :meth:`question`."""
        if answer is not _NO_ANSWER:
            self._threads.append(asyncio.ensure_future(asyncio.to_thread(_send, self._job_in, answer)))
        status, payload = await self._next()
        if status != "ok":
            raise RefitWorkerFailed("internal error: the refit job asked a question nobody answers")
        return payload

    async def stop(self) -> None:
        process = self._process
        if process.pid is not None and process.is_alive():
            process.kill()
        # the threads end once the worker is gone (a broken pipe, an end of file)
        await asyncio.gather(*self._threads, return_exceptions=True)
        self._job_in.close()
        self._result_out.close()
        if process.pid is not None:
            await asyncio.to_thread(process.join, 10)


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

    lowest_priority()
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
    """The worker: limits first, then the job (its questions answered over ``jobs``); the
    outcome goes back as (status, payload)."""
    try:
        _limit(budget)
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        fn, args, serving_pid = jobs.recv()
        leave_serving_cpus(serving_pid)
        with threadpool_limits(1):
            result = fn(*args)
            if inspect.isgenerator(result):
                result = _converse(result, jobs, results)
        results.send(("ok", result))
    except MemoryError:
        results.send(("memory", f"over the memory budget of {budget.memory_mb} MB (refit_memory_mb)"))
    except BaseException as exc:  # noqa: BLE001 - everything is reported, nothing escapes
        results.send(("error", f"the refit failed: {type(exc).__name__}: {exc}"))
    finally:
        results.close()


def _converse(
    job: Any, jobs: multiprocessing.connection.Connection, results: multiprocessing.connection.Connection,
) -> Any:
    """Drive a generator job: each value it yields goes to the gateway as a question, the
    answer comes back as the value of its ``yield``; what it returns is the result."""
    try:
        question = next(job)
        while True:
            results.send(("ask", question))
            question = job.send(jobs.recv())
    except StopIteration as done:
        return done.value
