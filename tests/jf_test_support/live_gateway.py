"""A real gateway and its stub judges on loopback, in a thread of their own (no tests here).

The gateway (uvicorn, the app of :func:`judgefuse.service.app.create_app`) and the OpenAI stub
its panel calls run on one event loop in a background thread, so a test can use the blocking
``Client`` and the ``AsyncClient`` alike against a real HTTP server. The stub counts every judge
call (``stub.requests``); the script decides what each judge answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from jf_test_support import openai_stub as stub_module
from jf_test_support.app_support import JUDGES, PLANTED, TENANT_KEYS, Script, make_settings, panel_yaml, uvicorn_server
from judgefuse.service.app import create_app

EXAMPLE_EXT_PANEL = Path(__file__).resolve().parents[2] / "examples" / "panels" / "ext.yaml"
"""The external-votes panel the Python client page names (``panel="ext"``), as the docs ship it."""

T = TypeVar("T")
API_KEY = TENANT_KEYS["tenant-a"]


@dataclass
class LiveGateway:
    url: str
    stub: stub_module.StubServer
    script: Script
    app: Any
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run ``coro`` on the gateway's loop (to reach its state safely) and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def judge_calls(self) -> int:
        return len(self.stub.requests)

    def wait_until_quiet(self, settle_s: float = 0.5) -> None:
        """Until no judge call has come for ``settle_s``: the requests in flight have their
        verdicts stored (a test stopping the gateway mid-run then knows what was judged)."""
        last, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < settle_s:
            now = self.judge_calls()
            if now != last:
                last, quiet_since = now, time.monotonic()
            time.sleep(0.05)

    @property
    def gateway(self) -> Any:
        return self.app.state.gateway


@contextlib.contextmanager
def live_gateway(tmp_path: Path, *, judges: tuple[str, ...] = JUDGES, quorum: int = 2,
                 extra_panels: tuple[str, ...] = (), **overrides: Any) -> Iterator[LiveGateway]:
    """Stub judges + a gateway on free loopback ports; ``overrides`` are settings."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: asyncio.Event | None = None
    box: dict[str, Any] = {}

    async def main() -> None:
        nonlocal stop
        stop = asyncio.Event()
        try:
            stub = await stub_module.StubServer().start()
            script = Script()
            stub.handler = script.handler
            stub.require_key = PLANTED
            panels = [panel_yaml(tmp_path, stub.url, judges=judges, quorum=quorum)]
            panels.append(EXAMPLE_EXT_PANEL)  # "ext": judges whose votes are posted (the docs' file)
            panels += [panel_yaml(tmp_path, stub.url, judges=judges, quorum=quorum, name=name)
                       for name in extra_panels]
            values = {"storage_url": f"sqlite:///{tmp_path / 'gateway.sqlite3'}", **overrides}
            settings = make_settings(tmp_path, panels, **values)
            app = create_app(settings, environ={"JF_TEST_PROVIDER_KEY": PLANTED})
            async with uvicorn_server(app) as url:
                box["gateway"] = LiveGateway(url, stub, script, app, loop)
                started.set()
                await stop.wait()
            await stub.stop()
        except BaseException as exc:
            box["error"] = exc
            started.set()
            raise

    def serve() -> None:
        asyncio.set_event_loop(loop)
        with contextlib.suppress(BaseException):
            loop.run_until_complete(main())

    thread = threading.Thread(target=serve, name="live-gateway", daemon=True)
    thread.start()
    if not started.wait(60) or "error" in box:
        raise RuntimeError(f"the gateway did not start: {box.get('error')!r}")
    try:
        yield box["gateway"]
    finally:
        assert stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()
