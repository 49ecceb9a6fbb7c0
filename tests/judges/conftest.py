"""Fixtures for the judge tests: a scripted OpenAI-compatible server on loopback.

The stub is :mod:`jf_test_support.openai_stub` (``tests`` is on pytest's pythonpath); tests
reach its action types through the ``stub_actions`` fixture.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from types import ModuleType

import pytest
from jf_test_support import openai_stub as stub_module
from jf_test_support.ports import free_port


@pytest.fixture
def stub_actions() -> ModuleType:
    """The stub module: ``Reply``, ``Status``, ``Hang``, ``Close``, ``Garbage``."""
    return stub_module


@pytest.fixture
async def openai_stub() -> AsyncIterator[object]:
    """A running :class:`StubServer`; script it with ``.script(...)``, read ``.requests``."""
    server = await stub_module.StubServer().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory):
    """A throwaway ``redis-server`` on loopback for the session (needs the binary installed)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60  # a bound on a stuck start, not a speed
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[object]:
    """A ``redis.asyncio.Redis`` on the session server, emptied before the test."""
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.aclose()
