"""A promotion decides against the target in force when it lands, not when its job started
(issue 45).

A background refit snapshots the panel's state when its job is made; its worker may read the
labels and fit much later (a niced process on a busy machine). A target tuned in between once
met a model promoted *without* a threshold: every verdict of it went to review as
``method_mismatch`` until the next refit. Here the refit's worker is held at a gate, so the job
exists (before any target) and the tune lands before its worker starts: the order is forced,
not hoped for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from jf_test_support import app_support as S
from jf_test_support.learning_support import informative, item

from judgefuse.service.app import create_app
from judgefuse.service.learning.refit_worker import RefitWorkers, WorkerJob

HEADERS = S.auth("tenant-a")
MISMATCH = ("method_mismatch", "model_mismatch")


class HeldWorkers(RefitWorkers):
    """The gateway's refit workers, except that a job waits at ``gate`` before its worker
    starts, and says so on ``waiting``: the refit job exists with what it read at its start."""

    def __init__(self, inner: RefitWorkers) -> None:
        super().__init__(inner.budget, workers=inner.workers)
        self.waiting = asyncio.Event()
        self.gate = asyncio.Event()

    @contextlib.asynccontextmanager
    async def session(self, fn: Callable[..., Any], *args: Any) -> AsyncIterator[WorkerJob]:
        self.waiting.set()
        await self.gate.wait()
        async with super().session(fn, *args) as job:
            yield job


async def test_a_refit_started_before_a_tune_promotes_paired_with_the_target_in_force(stub, tmp_path):
    server, script = stub
    script.by_question = informative
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}",
                               min_labels_for_refit=50, refit_every_labels=60)
    app = create_app(settings, environ={S.PLANTED_ENV: S.PLANTED})
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        gateway = app.state.gateway
        held = HeldWorkers(gateway.learning.refit_bounds.workers)
        gateway.learning.refit_bounds = dataclasses.replace(gateway.learning.refit_bounds, workers=held)
        for start in (0, 30):
            r = await client.post("/v1/judge/batch", json={"items": [item(i) for i in range(start, start + 30)]},
                                  headers=HEADERS)
            assert r.status_code == 200 and r.json()["n_ok"] == 30, r.text
        # the 60th label started the background refit: its job is made (no target yet) and waits
        await asyncio.wait_for(held.waiting.wait(), timeout=30)
        tuned = (await client.post("/v1/thresholds/tune", json={"target_precision": 0.5, "min_count": 5},
                                   headers=HEADERS)).json()
        assert tuned["stored"] is True and tuned["method"] == "majority", tuned
        held.gate.set()
        await gateway.scheduler.idle()

        models = (await client.get("/v1/fusion/models", headers=HEADERS)).json()
        assert models["history"], "the candidate wins on these labels: it is promoted, paired"
        for model in models["history"]:
            paired = model["threshold"]
            assert paired is not None, f"model version {model['version']} was promoted without a threshold"
            assert paired["target_precision"] == 0.5 and paired["delta"] == tuned["report"]["delta"]
            assert paired["version"] > tuned["version"]  # decided after the tune, against it
        thresholds = (await client.get("/v1/thresholds", headers=HEADERS)).json()
        assert thresholds["current"]["details"]["model_version"] == models["model_version"]

        r = await client.post("/v1/judge/batch", json={"items": [
            item(i, label=False) for i in range(100, 130)]}, headers=HEADERS)
        verdicts = [res["verdict"] for res in r.json()["results"]]
        assert {v["method"] for v in verdicts} == {models["active_method"]}
        codes = [v["threshold"]["code"] for v in verdicts]
        assert not [c for c in codes if c in MISMATCH], codes
        assert any(v["route"] == "auto_accept" for v in verdicts), codes
