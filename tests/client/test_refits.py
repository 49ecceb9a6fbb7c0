"""The refit log from the client (issue 47, item 2): ``Client.refit`` / ``Client.refits`` and their
``AsyncClient`` twins against a real gateway on loopback. Answers are the server's typed models
(attributes, not dicts), newest first, and every failure is a ``JudgefuseError``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from jf_test_support.live_gateway import API_KEY, LiveGateway, live_gateway

from judgefuse.client import AsyncClient, Client, InvalidRequest, RetryPolicy
from judgefuse.client.models import RefitLogEntry, RefitOut, RefitsOut

PATIENT = RetryPolicy(deadline_s=300, backoff_s=0.05, max_backoff_s=0.2)
"""A refit's first call starts the refit worker (a forkserver that imports the fitting code; it
also counts the labels), which takes seconds to tens of seconds on a busy machine."""

Do = Callable[..., Awaitable[Any]]


async def the_refit_log(do: Do, live: LiveGateway) -> None:
    empty = await do("refits")
    assert isinstance(empty, RefitsOut) and (empty.panel, empty.refits) == ("main", [])
    assert empty.active_method == "majority" and empty.model_version is None

    verdicts = [await do("judge", question=f"q{i}", answer_a="a", answer_b="b") for i in range(3)]
    for verdict in verdicts:
        await do("feedback", verdict.id, "A")
    started = time.time()
    first = await do("refit")
    assert isinstance(first, RefitOut) and first.status == "skipped" and first.n_labels == 3
    second = await do("refit", method="stacked")
    assert second.status == "skipped"

    log = await do("refits")
    assert [entry.trigger for entry in log.refits] == ["api", "api"]
    newest = log.refits[0]
    assert isinstance(newest, RefitLogEntry)  # attributes, not a dict
    assert (newest.status, newest.reason, newest.n_labels, newest.kind) == ("skipped", second.reason, 3, "refit")
    assert log.refits[1].reason == first.reason and "50" in first.reason  # min_labels_for_refit
    assert started - 5 <= log.refits[1].at <= newest.at <= time.time() + 5
    assert [e.reason for e in (await do("refits", limit=1)).refits] == [second.reason]

    # the same log, another panel: its own (empty); an unknown panel is the gateway's 422
    assert (await do("refits", panel="ext")).refits == []
    with pytest.raises(InvalidRequest) as unknown:
        await do("refits", panel="no-such-panel")
    assert unknown.value.status == 422 and [f.field for f in unknown.value.fields] == ["query.panel"]
    # a panel without a cold-start method: the gateway says so, naming the field
    with pytest.raises(InvalidRequest) as no_cold_start:
        await do("refit", cold_start=True)
    assert [f.field for f in no_cold_start.value.fields] == ["body.panel"]
    # refused before sending: nothing reaches the gateway
    for limit in (0, 51):
        with pytest.raises(InvalidRequest) as refused:
            await do("refits", limit=limit)
        assert (refused.value.status, [f.field for f in refused.value.fields]) == (0, ["query.limit"])
    with pytest.raises(InvalidRequest) as bad_body:
        await do("refit", method="")
    assert (bad_body.value.status, [f.field for f in bad_body.value.fields]) == (0, ["body.method"])
    assert len((await do("refits")).refits) == 2  # the refused calls logged nothing


def test_client_refits(tmp_path: Path) -> None:
    with live_gateway(tmp_path) as live, Client(live.url, API_KEY, retry=PATIENT) as client:

        async def do(name: str, *args: Any, **kwargs: Any) -> Any:
            return getattr(client, name)(*args, **kwargs)

        asyncio.run(the_refit_log(do, live))


async def test_async_client_refits(tmp_path: Path) -> None:
    with live_gateway(tmp_path) as live:
        async with AsyncClient(live.url, API_KEY, retry=PATIENT) as client:

            async def do(name: str, *args: Any, **kwargs: Any) -> Any:
                return await getattr(client, name)(*args, **kwargs)

            await the_refit_log(do, live)
