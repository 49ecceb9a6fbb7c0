"""A storage password never printed, in every form the drivers accept: the user-info, a
``password=`` query key (libpq and redis-py both read one), ``user=...&password=...``,
percent-encoded values and key names; in ``safe_url``, error messages, driver logs, ``export``'s
error and a failed start's message."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from judgefuse.service.storage import StorageError, StorageUnavailable
from judgefuse.service.storage.postgres import PostgresStorage
from judgefuse.service.storage.redis import RedisStorage
from judgefuse.service.storage.url_secrets import redact_url, secret_forms

SECRET = "hun%40ter-2Pw"  # percent-encoded '@': the decoded form hun@ter-2Pw must not leak either
DECODED = "hun@ter-2Pw"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("url", [
    f"postgresql://u:{SECRET}@h:5432/db",
    f"postgresql://u@h/db?password={SECRET}",
    f"postgresql://h/db?user=u&password={SECRET}&sslmode=disable",
    f"postgresql://h/db?PassWord={SECRET}",
    f"postgresql://h/db?pass%77ord={SECRET}",  # the key itself percent-encoded
    f"postgresql://h/db?sslpassword={SECRET}",
    f"redis://h:6379/0?password={SECRET}",
    f"redis://:{SECRET}@h:6379/0",
    f"rediss://user:{SECRET}@[::1]:7000/1?ssl_cert_reqs=none",
])
def test_every_form_of_the_password_is_masked(url: str) -> None:
    shown = redact_url(url, "storage")
    assert SECRET not in shown and DECODED not in shown and "hun" not in shown
    assert "***" in shown
    forms = secret_forms(url)
    assert SECRET in forms and DECODED in forms


def test_urls_without_a_secret_are_printed_as_given() -> None:
    for url in ("sqlite:///./judgefuse.sqlite3", "redis://h:6379/0", "postgresql://u@h/db?sslmode=require",
                "postgresql://h/db?user=u&pool_max_size=4"):
        assert redact_url(url, "storage") == url
        assert secret_forms(url) == []


async def test_redis_query_password_never_leaks_when_unreachable() -> None:
    port = _closed_port()
    store = RedisStorage(f"redis://127.0.0.1:{port}/0?password={SECRET}", retries=0, connect_timeout_s=0.5)
    assert SECRET not in repr(store) and DECODED not in store.safe_url
    await store.open()
    try:
        with pytest.raises(StorageUnavailable) as info:
            await store.get_verdict("acme", "v1")
        rendered = "".join(traceback.format_exception(info.value))
        assert SECRET not in rendered and DECODED not in rendered and "***" in rendered
    finally:
        await store.close()


async def test_redis_wrong_query_password_is_redacted(redis_with_password: tuple[int, str]) -> None:
    port, password = redis_with_password
    wrong = RedisStorage(f"redis://127.0.0.1:{port}/0?password=wrong-pw-123", retries=0)
    await wrong.open()
    try:
        with pytest.raises(StorageError) as info:
            await wrong.get_verdict("acme", "v1")
        assert "wrong-pw-123" not in "".join(traceback.format_exception(info.value))
    finally:
        await wrong.close()
    async with RedisStorage(f"redis://127.0.0.1:{port}/0?password={password}") as right:
        assert await right.ping()  # the query form is the driver's: it does authenticate


async def test_postgres_wrong_query_password_is_redacted_in_errors_and_logs(
    postgres_url: str, caplog: pytest.LogCaptureFixture,
) -> None:
    assert ":pg-Secr3t-xyz@" in postgres_url
    wrong_url = postgres_url.replace(":pg-Secr3t-xyz@", "@") + "?password=wrong-pw-123"
    wrong = PostgresStorage(wrong_url, pool_timeout_s=2)
    assert "wrong-pw-123" not in wrong.safe_url
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(StorageError) as info:
            await wrong.open()
    assert "password authentication failed" in str(info.value)
    assert "wrong-pw-123" not in "".join(traceback.format_exception(info.value))
    assert "wrong-pw-123" not in caplog.text
    right_url = postgres_url.replace(":pg-Secr3t-xyz@", "@") + "?password=pg-Secr3t-xyz"
    async with PostgresStorage(right_url) as right:
        assert await right.ping()


def _run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "judgefuse.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_export_error_does_not_print_a_query_password(tmp_path: Path) -> None:
    port = _closed_port()
    done = _run_cli("export", "--storage", f"redis://127.0.0.1:{port}/0?password={SECRET}",
                    str(tmp_path / "out.jsonl"))
    assert done.returncode == 1, done.stderr
    assert "***" in done.stderr
    assert SECRET not in done.stderr + done.stdout and DECODED not in done.stderr + done.stdout


def test_failed_start_does_not_print_a_query_password() -> None:
    port = _closed_port()
    done = _run_cli("serve", "--port", str(_closed_port()), "--storage",
                    f"postgresql://u@127.0.0.1:{port}/db?user=u&password={SECRET}")
    output = done.stderr + done.stdout
    assert "Application startup failed" in output and "***" in output
    assert SECRET not in output and DECODED not in output
