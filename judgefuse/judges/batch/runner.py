"""Judge items through the provider's batch API, in rounds, resumably.

A round judges every waiting item with the panel's judges served from the batch answers
(:class:`~judgefuse.judges.batch.answers.AnsweringClient`): an item whose requests are all
answered is finished and handed to ``on_judged`` at once; the requests still unanswered are
uploaded as one batch per judge, the batches are polled until they end, their output and
error files are downloaded into the answer store, and the next round judges the items still
waiting. The first round asks every item's first calls; a mode whose later call depends on an
earlier answer (a structured-output refusal, adaptive MP rounds) takes one more round. After
``max_rounds`` the last round finishes every item with what it has (an unanswered call is an
invalid vote, never a crash).

State lives beside the output (:mod:`.state`, :mod:`.answers`): a restarted run first finishes
the batches it had submitted (creates, polls, downloads), then judges with the answers it
already has, so no request is paid for twice.

Which judges can batch (:func:`batch_endpoint`): an Anthropic model (``anthropic/...``: message
batches at its ``api_base`` or ``https://api.anthropic.com``, :class:`AnthropicBatchAPI`), a
judge with an OpenAI-compatible ``api_base`` (its batches go to that endpoint) or an OpenAI model
without one (``https://api.openai.com/v1``). A local model has no batch API: a panel with one is
refused before anything is sent. An external judge is never called, so it needs none. What
Anthropic's messages cannot take (several samples in one request, logprobs, ``response_format``)
is refused before it is batched (:func:`~judgefuse.judges.batch.answers.anthropic_refusal`),
so the judge falls back exactly as it does online on such a refusal.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from judgefuse.errors import InputError
from judgefuse.judges.batch.answers import AnsweringClient, AnswerStore, anthropic_line, anthropic_refusal, batch_line
from judgefuse.judges.batch.api import ANTHROPIC_API_BASE, AnthropicBatchAPI, BatchStatus, OpenAIBatchAPI
from judgefuse.judges.batch.polling import PollSchedule, poll_until_ended
from judgefuse.judges.batch.state import BatchState, SubmittedBatch
from judgefuse.judges.config import JudgeConfig, PanelConfig
from judgefuse.judges.judge import Judge, read_api_key
from judgefuse.judges.panel import Panel
from judgefuse.judges.registry import build_client
from judgefuse.judges.transport.request import ChatClient
from judgefuse.judges.transport.retry import with_retries
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

__all__ = [
    "OPENAI_API_BASE",
    "BatchRun",
    "BatchRunReport",
    "BatchUnsupported",
    "answers_path",
    "batch_endpoint",
    "is_anthropic",
    "state_path",
]

OPENAI_API_BASE = "https://api.openai.com/v1"
MAX_LINES = 50_000
"""Requests per batch (OpenAI's limit; Anthropic's is 100,000): more are split over several batches."""


class BatchUnsupported(InputError, ValueError):
    """A judge of the panel cannot be asked through a batch API."""


def batch_endpoint(config: JudgeConfig) -> str | None:
    """Where ``config``'s batches go (None: an external judge, never called); see the module
    docstring for what is refused."""
    if config.external or config.model is None:
        return None
    if config.local is not None:
        raise BatchUnsupported(
            f"judge {config.name!r} is a local model, which has no batch API: run this panel without --batch"
        )
    if is_anthropic(config):
        return config.api_base or ANTHROPIC_API_BASE
    if config.api_base is not None:
        return config.api_base
    provider = config.model.split("/", 1)[0] if "/" in config.model else "openai"
    if provider != "openai":
        raise BatchUnsupported(
            f"judge {config.name!r}: --batch speaks the OpenAI batch API and Anthropic's message "
            f"batches; model {config.model!r} is neither an OpenAI or Anthropic model nor served at "
            "an OpenAI-compatible api_base"
        )
    return OPENAI_API_BASE


def is_anthropic(config: JudgeConfig) -> bool:
    """True for a judge whose batches are Anthropic message batches (an ``anthropic/`` model)."""
    return config.model is not None and config.model.startswith("anthropic/")


def state_path(out: Path) -> Path:
    return out.with_name(out.name + ".batch.json")


def answers_path(out: Path) -> Path:
    return out.with_name(out.name + ".batch-answers.jsonl")


@dataclass
class BatchRunReport:
    """What a batch run did: batches, requests, failures, rounds."""

    batches_created: int = 0
    batches_resumed: int = 0
    requests_submitted: int = 0
    failed_requests: int = 0
    retried_online: int = 0
    rounds: int = 0

    def line(self) -> str:
        return (
            f"batch: {self.batches_created} created, {self.batches_resumed} resumed, "
            f"{self.requests_submitted} requests submitted, {self.failed_requests} failed or expired"
            f"{f' ({self.retried_online} retried online)' if self.retried_online else ''}, "
            f"{self.rounds} rounds"
        )


ProgressCallback = Callable[[SubmittedBatch, BatchStatus], None]


def _silent(_batch: SubmittedBatch, _status: BatchStatus) -> None:
    return None


class BatchRun:
    """One ``judge --batch`` run of ``config`` writing beside ``out`` (module docstring).

    ``poll_s`` is the wait between two polls of a running batch (``poll_schedule``, when given,
    sets the whole schedule instead: backoff, deadline; :mod:`.polling`); ``retry_online`` sends a
    failed or expired request online once (the judge's own client, with its retries);
    ``on_progress`` hears every poll; ``apis`` injects the batch API per judge name (default:
    :class:`OpenAIBatchAPI` at :func:`batch_endpoint` with the judge's key).
    """

    def __init__(
        self,
        config: PanelConfig,
        out: Path,
        *,
        poll_s: float = 10.0,
        poll_schedule: PollSchedule | None = None,
        retry_online: bool = False,
        max_rounds: int = 4,
        environ: Mapping[str, str] | None = None,
        on_progress: ProgressCallback = _silent,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self.config = config
        self.poll = poll_schedule if poll_schedule is not None else PollSchedule(interval_s=poll_s)
        self.max_rounds = max_rounds
        self.on_progress = on_progress
        self._sleep = sleep
        self.report = BatchRunReport()
        self.state = BatchState.load(state_path(out))
        self.store = AnswerStore.load(answers_path(out))
        self.apis: dict[str, OpenAIBatchAPI | AnthropicBatchAPI] = {}
        self.clients: dict[str, AnsweringClient] = {}
        judges: list[Judge] = []
        for judge_config in config.judges:
            endpoint = batch_endpoint(judge_config)  # refuses before anything is sent
            key = read_api_key(judge_config, environ)
            anthropic = is_anthropic(judge_config)
            if endpoint is not None:
                self.apis[judge_config.name] = (
                    AnthropicBatchAPI(endpoint, key, spool=out.parent) if anthropic else OpenAIBatchAPI(endpoint, key)
                )
            fallback = _online_client(judge_config, key) if retry_online and endpoint is not None else None
            secret = key.get_secret_value() if key is not None else None
            client = AnsweringClient(judge_config.name, self.store, secret=secret, fallback=fallback,
                                     refuse=anthropic_refusal if anthropic else None)  # fmt: skip
            self.clients[judge_config.name] = client
            # the breaker would count "waiting for the batch" as failures and stop asking
            quiet = judge_config.model_copy(
                update={"circuit": judge_config.circuit.model_copy(update={"enabled": False})}
            )
            judges.append(Judge(quiet, api_key=key, client=client))
        self.panel = Panel(config, judges)

    async def run(self, items: Iterable[PairwiseItem], on_judged: Callable[[JudgedItem, bool], None]) -> BatchRunReport:
        """Judge ``items``; ``on_judged(judged, quorum_met)`` hears each as it is finished."""
        try:
            opened = self.state.open_batches()
            self.report.batches_resumed = sum(1 for batch in opened if batch.batch_id is not None)
            await self._finish_open_batches()
            waiting = list(items)
            for round_number in range(1, self.max_rounds + 1):
                self.report.rounds = round_number
                waiting = await self._round(waiting, on_judged, last=round_number == self.max_rounds)
                if not waiting:
                    break
                await self._submit_pending()
                await self._finish_open_batches()
        finally:
            self.report.failed_requests = self.store.failures()
            self.report.retried_online = sum(client.retried_online for client in self.clients.values())
        return self.report

    async def aclose(self) -> None:
        await self.panel.aclose()
        for api in self.apis.values():
            await api.aclose()

    async def _round(
        self, items: list[PairwiseItem], on_judged: Callable[[JudgedItem, bool], None], *, last: bool
    ) -> list[PairwiseItem]:
        """Judge ``items`` from the answers; those with a request still unanswered wait (unless
        this is the last round)."""
        waiting: list[PairwiseItem] = []
        for item in items:  # one at a time: a client's miss count then belongs to this item
            before = self._misses()
            votes: list[JudgeVote] = await self.panel.judge(item)
            if self._misses() > before and not last:
                waiting.append(item)
                continue
            on_judged(JudgedItem(item=item, votes=votes), self.panel.quorum_met(votes))
        return waiting

    def _misses(self) -> int:
        return sum(client.misses for client in self.clients.values())

    async def _submit_pending(self) -> None:
        """Upload each judge's unanswered requests (recorded in the state file at once)."""
        for name, client in self.clients.items():
            if not client.pending:
                continue
            config = next(judge for judge in self.config.judges if judge.name == name)
            api = self.apis[name]
            pending = list(client.pending.items())
            for start in range(0, len(pending), MAX_LINES):
                chunk = pending[start : start + MAX_LINES]
                lines = (
                    [anthropic_line(cid, request, config.model or "") for cid, request in chunk]
                    if is_anthropic(config)
                    else [batch_line(cid, request, config.wire_model("direct")) for cid, request in chunk]
                )
                data = b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)
                file_id = await api.upload(data)
                self.state.batches.append(SubmittedBatch(name, api.api_base, file_id, [cid for cid, _ in chunk]))
                self.state.save()
                self.report.requests_submitted += len(chunk)
            client.pending.clear()

    async def _finish_open_batches(self) -> None:
        """Create the uploaded batches not yet created, then poll and download every open one."""
        opened = self.state.open_batches()
        for batch in opened:
            if batch.batch_id is None:
                status = await self._api(batch).create(batch.input_file_id)
                batch.batch_id, batch.status = status.id, status.status
                self.state.save()
                self.report.batches_created += 1
        tasks = [asyncio.create_task(self._collect(batch)) for batch in opened]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:  # one batch failing stops the others' polls too
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    def _api(self, batch: SubmittedBatch) -> OpenAIBatchAPI | AnthropicBatchAPI:
        api = self.apis.get(batch.judge)
        if api is None:
            raise BatchUnsupported(
                f"{self.state.path} has an open batch for judge {batch.judge!r}, which this panel "
                "does not have: use the panel the run started with (or remove the file to start afresh)"
            )
        return api

    async def _collect(self, batch: SubmittedBatch) -> None:
        api = self._api(batch)
        assert batch.batch_id is not None

        def heard(status: BatchStatus) -> None:
            batch.status = status.status
            self.on_progress(batch, status)

        status = await poll_until_ended(api, batch.batch_id, self.poll, on_status=heard, sleep=self._sleep)
        for file_id in (status.output_file_id, status.error_file_id):
            if file_id is not None:
                self.store.add_file(await api.content(file_id))
        self.store.add_missing(
            batch.custom_ids,
            f"batch_{status.status}",
            f"batch {batch.batch_id} ended {status.status} without answering this request",
        )
        batch.collected = True
        self.state.save()


def _online_client(config: JudgeConfig, key: SecretStr | None) -> ChatClient:
    """The judge's online client stack (with its retries), for ``--batch-retry-online``."""
    retries = config.retries
    return with_retries(
        build_client(config.resolved_backend(), config, api_base=config.api_base, api_key=key),
        attempts=retries.attempts,
        base_delay_s=retries.base_delay_s,
        max_delay_s=retries.max_delay_s,
        deadline=config.timeout_s,
    )
