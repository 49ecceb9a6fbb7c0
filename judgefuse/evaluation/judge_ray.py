"""``judgefuse judge PAIRS --out VOTES --executor ray [--address ADDR] [--workers N]``: a file run
spread over a Ray cluster (the ``ray`` extra). docs/offline-evaluation.md, 'Judging on a Ray cluster'.

The contract is the local run's (:mod:`judgefuse.evaluation.judge_command`): the same votes file,
one fsynced line per item as it finishes (completion order, as the local run with
``--concurrency`` > 1; readers key by item id), the same resume by item id, the same progress bar
and summary line. What differs is who asks the judges: ``N`` Ray actors (:class:`JudgeWorker`,
one CPU each, spread over the nodes; default one per node with a CPU), each building the panel
once from the panel YAML (local model servers included: each worker starts its own) and keeping
``--concurrency`` items in flight. The driver holds the queue and the votes file:

* an item goes to one worker at a time and is written when its votes come back, so a finished
  item is never lost and never asked again;
* a worker that dies (its node lost, its process killed) fails the items it held; they go back
  to the queue and the surviving workers judge them (those items, at most ``--concurrency`` per
  lost worker, are the only ones whose judges may be asked twice: their answers died with the
  worker). With every worker lost the run stops and says so; rerunning resumes from the file;
* a driver that is killed loses only what was in flight: its workers die with it (Ray ends the
  actors of a dead owner) and a rerun skips every item already in the file.

Why actors and not Ray Data: the unit Ray Data hands back is a block, and the unit it retries
after a worker dies is a task over a whole block. A finished item inside a block that has not
come back would be lost on a kill and judged (paid) again on the retry; the local run's promise,
one durable line per finished item, needs items to come back one by one. The work is also not
data-bound: the pairs are read and validated on the driver (file:line errors, duplicate ids)
and each item is a few KB of text waiting on a model, so Ray Data's block streaming and
backpressure buy nothing here. The item-level calls cost about 1.5 ms per item more than the
local run (benchmarks/bench_ray_judge.py, an instant judge on 2 shared cores), little beside a
judge call.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import logging
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from judgefuse.errors import InputError, JudgefuseError
from judgefuse.evaluation.loaders import VotesWriter
from judgefuse.extras import MissingExtra
from judgefuse.judges.config import PanelConfig, parse_panel_config
from judgefuse.judges.panel import Panel
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

__all__ = [
    "JudgeWorker",
    "RayRunReport",
    "add_ray_arguments",
    "check_ray_arguments",
    "judge_on_ray",
]

START_TIMEOUT_S = 600.0
"""How long the driver waits for the first worker to start its panel (a node may be busy, a local
model server slow to load) before it gives up."""


class RayExecutorError(JudgefuseError, OSError):
    """The cluster could not finish the run (no worker started, every worker lost): a failure of
    the run, not of its input (exit status 1, as an unwritable output is); rerunning resumes."""


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local: this process (default); ray: spread the items over a Ray cluster (judgefuse[ray])",
    )
    parser.add_argument(
        "--address",
        help="ray executor: the cluster to join (host:port of its head; default: RAY_ADDRESS, else a new local Ray)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        help="ray executor: Ray workers, one CPU each (default: one per node with a CPU); --concurrency is per worker",
    )


def check_ray_arguments(args: argparse.Namespace, *, single: bool) -> None:
    """Refuse flags that do not go together; with ``--executor ray``, the ``ray`` extra must be there."""
    if args.executor != "ray":
        for flag, value in (("--address", args.address), ("--workers", args.workers)):
            if value is not None:
                raise InputError(f"{flag} is for --executor ray")
        return
    if single:
        raise InputError("--executor ray judges a file of pairs (with --out), not a single pair")
    if args.batch:
        raise InputError("--executor ray and --batch are two ways to run a file: give one")
    if args.concurrency < 1:
        raise InputError(f"--concurrency must be >= 1, got {args.concurrency}")
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    if importlib.util.find_spec("ray") is None:
        raise MissingExtra("ray", "ray")


# ---------------------------------------------------------------- the worker (a Ray actor)


class JudgeWorker:
    """One Ray worker's panel: built once from the panel YAML's text, started once, asked per item.

    Wrapped with ``ray.remote`` by :func:`judge_on_ray` (this module imports no Ray, so it loads
    without the extra). Items and votes cross as JSON: the worker's judgefuse must be the
    driver's version, the JSON keeps a mismatch loud (a validation error) rather than silent.
    """

    def __init__(self, panel_text: str, source: str, environ: Mapping[str, str]) -> None:
        self._panel_text = panel_text
        self._source = source
        self._environ = dict(environ)
        self._panel: Panel | None = None

    async def start(self) -> dict[str, str]:
        """Build and start the panel; the node this worker runs on, and the error that stopped it if any."""
        where = {"node": _node_id()}
        try:
            config = parse_panel_config(yaml.safe_load(self._panel_text), source=self._source)
            panel = Panel.from_config(config, environ={**os.environ, **self._environ})
            await panel.start()
        except Exception as exc:  # reported by the driver, which names the node
            return {**where, "error": f"{type(exc).__name__}: {exc}"}
        self._panel = panel
        return where

    async def judge(self, item_json: str) -> tuple[str, bool]:
        """One item's votes as a votes-file line (JSON), and whether the quorum was met."""
        assert self._panel is not None, "start() first"
        item = PairwiseItem.model_validate_json(item_json)
        votes = await self._panel.judge(item)
        return JudgedItem(item=item, votes=votes).model_dump_json(), self._panel.quorum_met(votes)

    async def close(self) -> None:
        if self._panel is not None:
            await self._panel.aclose()
            self._panel = None


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


# ---------------------------------------------------------------- the driver


@dataclass
class _Worker:
    index: int
    handle: Any
    node: str = ""
    started: bool = False
    lost: str | None = None


@dataclass
class RayRunReport:
    """The Ray side of a run, printed after the summary line."""

    address: str = ""
    workers: int = 0
    started: int = 0
    nodes: set[str] = field(default_factory=set)
    lost: list[str] = field(default_factory=list)
    start_errors: list[str] = field(default_factory=list)
    requeued: int = 0
    start_s: float = 0.0
    """From joining the cluster to the first worker's panel started."""

    def line(self) -> str:
        if not self.address:
            return "ray: no cluster joined"
        nodes = ", ".join(sorted(node[:8] for node in self.nodes))
        text = (
            f"ray: {self.started} of {self.workers} worker{'s' if self.workers != 1 else ''} started "
            f"on {len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''} ({nodes}) at {self.address}, "
            f"the first in {self.start_s:.1f} s"
        )
        if self.start_errors:
            text += f"; {len(self.start_errors)} did not start ({'; '.join(self.start_errors)})"
        if self.lost:
            text += (
                f"; {len(self.lost)} lost ({'; '.join(self.lost)}): the {self.requeued} "
                f"item{'s' if self.requeued != 1 else ''} they held went back to the queue"
            )
        return text


def _api_keys(config: PanelConfig) -> dict[str, str]:
    """The panel's API keys from the driver's environment, for workers on nodes without them."""
    names = {judge.api_key_env for judge in config.judges if judge.api_key_env}
    return {name: os.environ[name] for name in sorted(names) if name and name in os.environ}


def _is_worker_loss(exc: BaseException) -> bool:
    from ray import exceptions

    return isinstance(exc, exceptions.RayActorError | exceptions.ActorUnavailableError)


async def judge_on_ray(
    args: argparse.Namespace,
    panel_path: Path,
    config: PanelConfig,
    items: list[PairwiseItem],
    writer: VotesWriter,
    on_judged: Callable[[JudgedItem, list[JudgeVote], bool], None],
    report: RayRunReport,
) -> None:
    """Judge ``items`` on the cluster; each finished item is written by ``writer`` and passed to
    ``on_judged`` (the summary and the bar) as it comes back. Fills ``report``."""
    import ray

    address = args.address or os.environ.get("RAY_ADDRESS")
    if address:
        await asyncio.to_thread(_reachable, address)
    joined = time.perf_counter()
    # stdout keeps the summary alone, as in the local run: Ray prints its workers' output and
    # the cluster's error messages (a lost node's last raylet log) on the driver's stdout
    with contextlib.redirect_stdout(sys.stderr):
        ray.init(
            address=args.address,
            logging_level=logging.WARNING,
            include_dashboard=False if args.address is None and "RAY_ADDRESS" not in os.environ else None,
        )
        try:
            workers = _workers(ray, args, panel_path, config, report)
            try:
                await _run(workers, items, args.concurrency, writer, on_judged, report, joined)
            finally:
                await _close(workers)
        finally:
            ray.shutdown()


def _reachable(address: str) -> None:
    """Fail at once on a cluster address nothing answers (Ray itself retries for minutes)."""
    target = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = target.rpartition(":")
    if target in ("auto", "local") or not host or not port.isdigit():
        return  # Ray's own forms (and its error for a malformed one)
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=10):
            pass
    except OSError as exc:
        raise RayExecutorError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def _workers(
    ray: Any, args: argparse.Namespace, panel_path: Path, config: PanelConfig, report: RayRunReport
) -> list[_Worker]:
    """The workers, asked for (one CPU each, spread over the nodes; they start as Ray places them)."""
    report.address = str(ray.get_runtime_context().gcs_address)
    cpu_nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    count = args.workers if args.workers is not None else max(1, len(cpu_nodes))
    report.workers = count
    actor = ray.remote(JudgeWorker).options(
        num_cpus=1,
        max_restarts=0,
        max_task_retries=0,
        max_concurrency=args.concurrency + 2,
        scheduling_strategy="SPREAD",
    )
    panel_text = panel_path.read_text(encoding="utf-8")
    return [_Worker(i, actor.remote(panel_text, str(panel_path), _api_keys(config))) for i in range(count)]


async def _run(
    workers: list[_Worker],
    items: list[PairwiseItem],
    concurrency: int,
    writer: VotesWriter,
    on_judged: Callable[[JudgedItem, list[JudgeVote], bool], None],
    report: RayRunReport,
    joined: float,
) -> None:
    """The queue: ``concurrency`` slots per worker take items while there are any; an item a lost
    worker held goes back to the front. Returns when every item is written; raises
    :class:`RayExecutorError` when no worker is left (or none starts) with items still queued."""
    queue: deque[PairwiseItem] = deque(items)
    state = asyncio.Condition()
    flight = {"items": 0, "starting": len(workers)}

    def finished() -> bool:
        return not queue and flight["items"] == 0

    def alive() -> bool:
        return any(w.started and w.lost is None for w in workers)

    async def start(worker: _Worker) -> None:
        try:
            where = await worker.handle.start.remote()
        except Exception as exc:
            if not _is_worker_loss(exc):
                raise
            where = {"node": "", "error": f"died while starting ({type(exc).__name__})"}
        async with state:
            flight["starting"] -= 1
            worker.node = where["node"]
            if "error" in where:
                worker.lost = f"worker {worker.index} on node {worker.node[:8] or '?'}: {where['error']}"
                report.start_errors.append(worker.lost)
            else:
                worker.started = True
                if report.started == 0:
                    report.start_s = time.perf_counter() - joined
                report.started += 1
                report.nodes.add(worker.node)
            state.notify_all()

    async def slot(worker: _Worker) -> None:
        while True:
            async with state:
                await state.wait_for(lambda: bool(queue) or finished() or worker.lost is not None)
                if worker.lost is not None or not queue:
                    return
                item = queue.popleft()
                flight["items"] += 1
            try:
                line, quorum_met = await worker.handle.judge.remote(item.model_dump_json())
            except Exception as exc:
                if not _is_worker_loss(exc):
                    raise
                async with state:  # nothing of it was written: another worker takes it
                    queue.appendleft(item)
                    flight["items"] -= 1
                    report.requeued += 1
                    if worker.lost is None:
                        worker.lost = f"worker {worker.index} on node {worker.node[:8]} ({type(exc).__name__})"
                        report.lost.append(worker.lost)
                    state.notify_all()
                return
            judged = JudgedItem.model_validate_json(line)
            writer.write(judged)
            on_judged(judged, judged.votes, quorum_met)
            async with state:
                flight["items"] -= 1
                state.notify_all()

    async def serve(worker: _Worker) -> None:
        await start(worker)
        if worker.started:
            await asyncio.gather(*(slot(worker) for _ in range(concurrency)))

    async def wait() -> None:
        """Until every item is written, or no worker is left to write them; a worker still
        starting (waiting for a CPU, loading a model) is waited for up to START_TIMEOUT_S."""
        async with state:
            while not finished():
                if alive():
                    await state.wait_for(lambda: finished() or not alive())
                    continue
                if flight["starting"] == 0:
                    return
                try:
                    async with asyncio.timeout(START_TIMEOUT_S):
                        await state.wait_for(lambda: alive() or flight["starting"] == 0)
                except TimeoutError:
                    raise RayExecutorError(
                        f"no Ray worker started its panel within {START_TIMEOUT_S:.0f} s (asked for "
                        f"{len(workers)} workers of one CPU each: has the cluster that many free CPUs?)"
                    ) from None

    tasks = [asyncio.create_task(serve(worker)) for worker in workers]
    waiter = asyncio.create_task(wait())
    try:
        while not waiter.done():
            done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not waiter:
                    task.result()  # a bug inside a worker's judging surfaces here, as in the local run
                    tasks.remove(task)
        waiter.result()
    finally:
        for task in [waiter, *tasks]:
            task.cancel()
        await asyncio.gather(waiter, *tasks, return_exceptions=True)
    if queue:
        if report.started == 0:
            raise RayExecutorError("no Ray worker could start the panel: " + "; ".join(report.start_errors))
        raise RayExecutorError(
            f"every Ray worker was lost ({'; '.join(report.lost)}); {len(queue)} items were not "
            "judged: rerun the same command to resume"
        )


async def _close(workers: list[_Worker]) -> None:
    import ray

    async def close(worker: _Worker) -> None:
        if worker.started and worker.lost is None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(30):
                    await worker.handle.close.remote()
        with contextlib.suppress(Exception):
            ray.kill(worker.handle)

    await asyncio.gather(*(close(worker) for worker in workers))
