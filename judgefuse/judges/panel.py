"""A panel of judges: built from a YAML file, started as a unit, asked concurrently.

>>> async with Panel.from_yaml("panel.yaml") as panel:          # doctest: +SKIP
...     votes = await panel.judge(item)

``async with panel`` starts the local model servers its judges need (one server per distinct
``local`` entry: judges with the same ``local`` settings share it), then every judge's client;
leaving closes the clients and stops the servers, even after an error.

:meth:`Panel.judge` asks every judge at once (``asyncio`` tasks) and waits at most the panel's
``deadline_s``: a judge still running then is cancelled and yields an invalid vote
``"deadline exceeded"``, while the votes that finished are kept. One vote per judge, in the
order of the config. Whether enough votes are valid is :meth:`Panel.quorum_met`'s call; fusion
(the caller) decides what to do about it (docs/design.md, 'Serving': a failed judge never fails the
request while a quorum remains).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from judgefuse.judges.config import PanelConfig, load_panel_config
from judgefuse.judges.judge import Judge
from judgefuse.judges.transport.cache import ResponseCache
from judgefuse.judges.types import JudgeVote, PairwiseItem

__all__ = ["DEFAULT_PANEL", "Panel", "default_panel_path"]

DEFAULT_PANEL = "default.yaml"


def default_panel_path() -> Path:
    """The packaged no-API-key panel (one local SmolLM2 server, logprob + SC judges)."""
    return Path(str(importlib.resources.files("judgefuse.judges") / "panels" / DEFAULT_PANEL))


class Panel:
    """Judges plus the local servers they need; see the module docstring."""

    def __init__(self, config: PanelConfig, judges: Sequence[Judge]) -> None:
        if [j.name for j in judges] != [j.name for j in config.judges]:
            raise ValueError("judges must match config.judges, in order")
        self.config = config
        self.judges = list(judges)
        self._servers: dict[str, Any] = {}
        self._entered = False

    @classmethod
    def from_config(
        cls,
        config: PanelConfig,
        *,
        environ: Mapping[str, str] | None = None,
        cache: ResponseCache | None = None,
    ) -> Panel:
        """Build every judge now (API keys are read from the environment here)."""
        judges = [Judge.from_config(judge, environ=environ, cache=cache) for judge in config.judges]
        return cls(config, judges)

    @classmethod
    def from_yaml(
        cls, path: str | Path, *, environ: Mapping[str, str] | None = None, cache: ResponseCache | None = None
    ) -> Panel:
        """Read, validate and build the panel in ``path`` (errors name the file and field)."""
        return cls.from_config(load_panel_config(path), environ=environ, cache=cache)

    @property
    def name(self) -> str:
        return self.config.name

    def __repr__(self) -> str:
        return f"Panel(name={self.name!r}, judges={[j.name for j in self.judges]!r}, fusion={self.config.fusion!r})"

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> Self:
        """Start local servers (shared per distinct ``local`` entry), then every judge's client."""
        try:
            for judge in self.judges:
                local = judge.config.local
                if local is None:
                    await judge.start()
                    continue
                key = local.model_dump_json()
                server = self._servers.get(key)
                if server is None:
                    server = local.build()
                    self._servers[key] = server
                    await server.astart()
                await judge.start(api_base=server.base_url)
        except BaseException:
            await self.aclose()
            raise
        self._entered = True
        return self

    async def aclose(self) -> None:
        """Close every judge's client and stop the servers (idempotent, never partial)."""
        self._entered = False
        for judge in self.judges:
            with contextlib.suppress(Exception):
                await judge.aclose()
        servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            with contextlib.suppress(Exception):
                await server.astop()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ judging
    async def judge(self, item: PairwiseItem, *, tenant: str | None = None) -> list[JudgeVote]:
        """Every judge's vote on ``item`` (config order), within the panel deadline."""
        return await self.judge_with(self.judges, item, timeout_s=self.config.deadline_s, tenant=tenant)

    async def judge_with(
        self, judges: Sequence[Judge], item: PairwiseItem, *, timeout_s: float | None, tenant: str | None = None
    ) -> list[JudgeVote]:
        """The votes of ``judges`` (this panel's, e.g. one cascade stage's) on ``item``, asked
        concurrently. A judge still running after ``timeout_s`` is cancelled and gives an invalid
        ``"deadline exceeded"`` vote; the votes that finished are kept. ``timeout_s`` also bounds
        the wait for a judge's concurrency slot (a judge's own ``timeout_s`` starts only once its
        call has one). ``tenant`` (None: anonymous) is whose request this is: each judge shares
        its slots fairly between tenants."""
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(judge.vote(item, tenant=tenant), name=f"judge:{judge.name}") for judge in judges
        ]
        try:
            done, pending = await asyncio.wait(tasks, timeout=timeout_s)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        votes: list[JudgeVote] = []
        for judge, task in zip(judges, tasks, strict=True):
            if task in done:
                votes.append(task.result())  # a programming error inside a judge surfaces here
            else:
                votes.append(
                    JudgeVote.invalid(
                        judge.name,
                        judge.config.mode,
                        f"deadline exceeded: the panel deadline of {self.config.deadline_s:g}s passed",
                        latency_s=time.perf_counter() - started,
                    )
                )
        return votes

    def quorum_met(self, votes: Sequence[JudgeVote]) -> bool:
        """True when at least the configured quorum of votes is valid."""
        return sum(1 for vote in votes if vote.valid) >= self.config.quorum_count()
