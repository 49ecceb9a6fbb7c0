"""Shared helpers for the app tests (no tests here): a scripted judge panel on the OpenAI stub,
an app with its lifespan running, an httpx client over ASGI, and a real uvicorn server.

The stub server is :mod:`jf_test_support.openai_stub`; its ``StubServer`` class is reused, not
copied. Test modules ``from jf_test_support import app_support as S`` (``tests`` is on pytest's
``pythonpath``: every test helper lives in that one package); the fixtures built on these
helpers (``stub``) are in ``tests/service/conftest.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from jf_test_support import openai_stub as stub_module
from jf_test_support.ports import free_port
from judgefuse.service.app import create_app
from judgefuse.service.settings import Settings
from judgefuse.service.storage import Storage

TESTS = Path(__file__).resolve().parents[1]
PLANTED = "sk-test-PLANTED-KEY-123"
PLANTED_ENV = "JF_TEST_PROVIDER_KEY"
TENANT_KEYS = {"tenant-a": "key-for-tenant-a-0001", "tenant-b": "key-for-tenant-b-0002"}
METRICS_TOKEN = "operator-metrics-token-0003"
"""The operator's token: every tenant's /metrics series and the cross-tenant dashboard."""
JUDGES = ("j1", "j2", "j3")




def sc_text(choice: str, confidence: int) -> str:
    return json.dumps({
        "selected_output": f"Output ({choice.lower()})",
        "confidence_score": confidence,
        "explanation": f"{choice} looks better",
    })


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TENANT_KEYS[tenant]}"}


def admin() -> dict[str, str]:
    """Headers carrying the metrics token (the operator)."""
    return {"Authorization": f"Bearer {METRICS_TOKEN}"}


@dataclass
class Script:
    """What each judge answers: a fixed (choice, confidence), an action, or a function of the
    question text. Keyed by the wire model name (= judge name here)."""

    fixed: dict[str, Any] = field(default_factory=dict)
    by_question: Callable[[str, str], Any] | None = None

    def set(self, judge: str, choice: str | None = None, confidence: int = 80, *,
            action: Any = None) -> None:
        self.fixed[judge] = action if action is not None else (choice, confidence)

    def handler(self, body: dict[str, Any]) -> Any:
        model = body.get("model", "")
        text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        if self.by_question is not None:
            result = self.by_question(model, text)
            if result is not None:
                return self._action(result)
        return self._action(self.fixed.get(model, ("A", 80)))

    def _action(self, value: Any) -> Any:
        if isinstance(value, tuple):
            choice, confidence = value
            return stub_module.Reply(texts=sc_text(choice, confidence))
        return value


def panel_yaml(tmp_path: Path, url: str, *, judges: tuple[str, ...] = JUDGES, quorum: int = 2,
               name: str = "main", fusion: str = "majority", timeout_s: float = 3.0,
               deadline_s: float = 10.0) -> Path:
    entries = "".join(textwrap.dedent(f"""\
          - name: {j}
            model: openai/{j}
            backend: direct
            api_base: {url}
            api_key_env: {PLANTED_ENV}
            mode: sc
            timeout_s: {timeout_s}
            retries: {{attempts: 1, base_delay_s: 0, max_delay_s: 0}}
        """) for j in judges)
    text = (f"name: {name}\nfusion: {fusion}\nquorum: {quorum}\ndeadline_s: {deadline_s:g}\njudges:\n"
            + textwrap.indent(entries, "  "))
    path = tmp_path / f"panel-{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


SPEED_GATES_OFF: dict[str, float] = {
    "shed_loop_lag_s": 0.0, "shed_wait_s": 0.0, "shed_sojourn_s": 0.0, "work_wait_s": 60.0}
"""The server's load-shedding gates as the suite runs them unless a test sets them: off, and a
judging request past ``max_inflight_work`` waits its turn instead of being refused after 50 ms.
Those gates judge the machine's speed (a loop late for a whole 200 ms window, a request that
waited 50 ms), so on a busy machine they refused requests of tests about something else (40
concurrent audit labels answered 429 by the loop-lag gate). Their own tests
(tests/service/web/test_backpressure*.py) set each value they rely on."""


def make_settings(tmp_path: Path, panels: list[Path], **overrides: Any) -> Settings:
    """Settings for an app under test: the test tenants' keys, a metrics token, no background
    refits, no state cache, :data:`SPEED_GATES_OFF` (each unless ``overrides`` names it, flat or
    in ``server``)."""
    values: dict[str, Any] = {
        "storage_url": f"sqlite:///{tmp_path / 'unused.sqlite3'}",
        "panels": panels,
        "api_keys": {t: hashlib.sha256(k.encode()).hexdigest() for t, k in TENANT_KEYS.items()},
        "metrics_token": hashlib.sha256(METRICS_TOKEN.encode()).hexdigest(),
        "refit_every_labels": 0,
        "state_ttl_s": 0.0,
    }
    values.update(overrides)
    server = dict(values.get("server") or {})
    for key, value in SPEED_GATES_OFF.items():
        if key not in server and key not in values:
            server[key] = value
    values["server"] = server
    return Settings(**values)


@contextlib.asynccontextmanager
async def running_app(settings: Settings, storage: Storage | None = None,
                      environ: dict[str, str] | None = None) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The app with its lifespan running and an httpx client over ASGI."""
    env = {PLANTED_ENV: PLANTED} if environ is None else environ
    app = create_app(settings, storage=storage, environ=env)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield app, client


@contextlib.asynccontextmanager
async def uvicorn_server(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port (in this event loop)."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await wait_started(server, task)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=START_WITHIN_S)


# A server's start (the app's lifespan: storage opened, panels built) and its shutdown take well
# under a second when the machine is idle; the bound is how long a stuck server may take to
# fail, not a speed the test asserts. 5 s was too little beside two CPU hogs on 2 cores.
START_WITHIN_S = 60.0


async def wait_started(server: Any, task: asyncio.Task[Any], within_s: float = START_WITHIN_S) -> None:
    """Return once uvicorn ``server`` (serving in ``task``) listens; raise what the serve task
    raised if it ended first, or ``RuntimeError`` after ``within_s`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn stopped before it started serving")
        if loop.time() > deadline:
            raise RuntimeError(f"uvicorn did not start within {within_s:.0f} s")
        await asyncio.sleep(0.01)


# ------------------------------------------------------------------------------- the stub judge
@contextlib.asynccontextmanager
async def scripted_stub() -> AsyncIterator[tuple[Any, Script]]:
    """A running stub OpenAI server scripted per judge; (server, script). The service tests'
    ``stub`` fixture (tests/service/conftest.py)."""
    server = await stub_module.StubServer().start()
    script = Script()
    server.handler = script.handler
    server.require_key = PLANTED
    try:
        yield server, script
    finally:
        await server.stop()
