"""Start, health-check and stop a local llama.cpp judge server (xllamacpp) as a subprocess.

>>> with LocalModelServer(smollm2_gguf_path(), threads=2) as srv:    # doctest: +SKIP
...     litellm.completion(model="openai/local", api_base=srv.base_url, api_key="none", ...)

The server speaks the OpenAI chat-completions API on loopback. Known behaviour of the
llama.cpp server behind it (xllamacpp 2026.10.11549), which a judge must work around:

* ``n`` > 1 is refused with HTTP 400 (``Field 'n': Value must be between 1 <= value <= 1,
  but got 2``): self-consistency must send one request per sample, each with its own seed;
* ``logprobs=True, top_logprobs=K`` returns the OpenAI shape
  (``choices[0].logprobs.content[i].top_logprobs``);
* ``seed`` is honoured per request: the same seed at the same temperature repeats the sample.

The model runs in a child process (``python -m judgefuse.judges.local._runner``) whose output
goes to a log file, so the caller's event loop is never blocked by llama.cpp and a crash of the
model cannot take the caller down. :meth:`LocalModelServer.stop` is idempotent and is also run
at interpreter exit; the child additionally exits by itself when its parent dies.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from judgefuse.errors import JudgefuseError

RUNNER_MODULE = "judgefuse.judges.local._runner"


class LocalServerError(JudgefuseError, RuntimeError):
    """The local model server could not be started (it died, or did not answer in time)."""


_LIVE: weakref.WeakSet[LocalModelServer] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # pragma: no cover - exercised at interpreter exit
    for srv in list(_LIVE):
        try:
            srv.stop()
        except Exception:  # noqa: BLE001, S110 - best effort at exit, never raise there
            pass


class LocalModelServer:
    """One GGUF served over HTTP by a managed ``xllamacpp`` child process.

    Parameters
    ----------
    gguf_path:
        The model file. Checked before anything is spawned (``FileNotFoundError``).
    host, port:
        Where to listen. ``port=0`` (default) lets llama.cpp pick a free port; the real one is
        read back from the child, so there is no race between picking and binding.
    threads:
        CPU threads for generation and prompt processing.
    ctx_size:
        Context window in tokens (per slot).
    parallel:
        Number of llama.cpp slots, i.e. requests decoded concurrently (the context is per slot).
    alias:
        Model name the server reports in ``/v1/models`` and responses (cosmetic).
    startup_timeout:
        Seconds to wait for the model to load and ``/health`` to answer.
    log_path:
        Where the child's stdout/stderr go (appended, kept). Default: a temporary directory
        removed on :meth:`stop`; a failed start quotes the log's last lines in its error.
    """

    def __init__(
        self,
        gguf_path: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        threads: int = 2,
        ctx_size: int = 4096,
        parallel: int = 1,
        alias: str = "local",
        startup_timeout: float = 120.0,
        stop_timeout: float = 10.0,
        log_path: str | os.PathLike[str] | None = None,
        python: str | None = None,
    ) -> None:
        if threads < 1 or ctx_size < 1 or parallel < 1:
            raise ValueError("threads, ctx_size and parallel must be >= 1")
        if not 0 <= port <= 65535:
            raise ValueError(f"port out of range: {port}")
        self.gguf_path = Path(gguf_path)
        self.host = host
        self.requested_port = port
        self.threads = threads
        self.ctx_size = ctx_size
        self.parallel = parallel
        self.alias = alias
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.python = python or sys.executable
        self._user_log = Path(log_path) if log_path is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self._log_path: Path | None = None
        self._address: str | None = None

    # ------------------------------------------------------------------ properties
    @property
    def running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def address(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        if self._address is None:
            raise LocalServerError("server not started")
        return self._address

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``http://HOST:PORT/v1``), for ``api_base``."""
        return self.address + "/v1"

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        """Spawn the child and block until ``/health`` answers 200; idempotent while running."""
        if self.running:
            return self
        if self._proc is not None:  # a previous child died: clean up before a fresh start
            self.stop()
        if not self.gguf_path.is_file():
            raise FileNotFoundError(f"GGUF model file not found: {self.gguf_path}")
        self._workdir = Path(tempfile.mkdtemp(prefix="judgefuse-local-"))
        self._log_path = self._user_log or (self._workdir / "server.log")
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        ready = self._workdir / "ready.json"
        cmd = [
            self.python, "-m", RUNNER_MODULE,
            "--model", str(self.gguf_path),
            "--host", self.host,
            "--port", str(self.requested_port),
            "--threads", str(self.threads),
            "--ctx-size", str(self.ctx_size),
            "--parallel", str(self.parallel),
            "--alias", self.alias,
            "--ready-file", str(ready),
        ]  # fmt: skip
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, close_fds=True
            )
        _LIVE.add(self)
        try:
            self._wait_ready(ready)
        except BaseException:
            self.stop()  # the error message already quotes the log tail
            raise
        return self

    def _wait_ready(self, ready: Path) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise LocalServerError(
                    f"local model server exited with code {code} while starting "
                    f"({self.gguf_path}); log {self._log_path}:\n{self._log_tail()}"
                )
            if self._address is None and ready.is_file():
                try:
                    self._address = str(json.loads(ready.read_text(encoding="utf-8"))["address"])
                except (ValueError, KeyError, OSError):
                    pass  # replaced atomically, so this is only a torn read on odd filesystems
            if self._address is not None and self.health():
                return
            time.sleep(0.1)
        raise LocalServerError(
            f"local model server did not become healthy within {self.startup_timeout:.0f} s "
            f"({self.gguf_path}); log {self._log_path}:\n{self._log_tail()}"
        )

    def health(self, timeout: float = 2.0) -> bool:
        """True if ``GET /health`` answers 200 (the model is loaded and ready)."""
        if self._address is None:
            return False
        try:
            with urllib.request.urlopen(self._address + "/health", timeout=timeout) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``stop_timeout``); idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=self.stop_timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=self.stop_timeout)
            else:
                proc.wait()
        _LIVE.discard(self)
        self._address = None
        workdir, self._workdir = self._workdir, None
        if workdir is not None:  # a user-given log_path lives elsewhere and is kept
            shutil.rmtree(workdir, ignore_errors=True)
            if self._log_path is not None and workdir in self._log_path.parents:
                self._log_path = None

    def _log_tail(self, n_lines: int = 30) -> str:
        if self._log_path is None or not self._log_path.is_file():
            return "(no log)"
        lines = self._log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-n_lines:])

    # ------------------------------------------------------------------ async / context managers
    async def astart(self) -> Self:
        """:meth:`start` in a worker thread, so the event loop keeps running while the model loads."""
        return await asyncio.to_thread(self.start)

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await self.astart()

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.astop()

    def __repr__(self) -> str:
        where = self._address or "not started"
        return f"LocalModelServer({str(self.gguf_path)!r}, {where})"

    def __del__(self) -> None:  # last resort: never leave a model process behind
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
                proc.wait(timeout=5)
            except Exception:  # noqa: BLE001, S110 - a finaliser must not raise
                pass

    def describe(self) -> dict[str, Any]:
        """Settings and state, for logs and the ``/health`` of the gateway."""
        return {
            "gguf_path": str(self.gguf_path),
            "address": self._address,
            "pid": self.pid,
            "threads": self.threads,
            "ctx_size": self.ctx_size,
            "parallel": self.parallel,
            "running": self.running,
        }
