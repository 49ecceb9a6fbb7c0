"""A planted API key never shows in an exception, its chain, a repr or a log line."""

from __future__ import annotations

import logging
import traceback

import pytest

from judgefuse.judges.transport import ChatRequest, DirectOpenAIClient, LiteLLMClient, TransportError, with_retries

PLANTED = "sk-test-PLANTED-123"
MESSAGES = [{"role": "user", "content": "hi"}]


def _all_text(error: BaseException) -> str:
    return "\n".join([str(error), repr(error), *traceback.format_exception(error)])


@pytest.mark.parametrize("kind", ["direct", "litellm"])
@pytest.mark.parametrize("scenario", ["echoed_401", "status_429", "status_500", "timeout", "closed", "garbage"])
async def test_planted_key_never_leaks(kind, scenario, openai_stub, stub_actions, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="LiteLLM")
    if scenario == "echoed_401":
        openai_stub.require_key = "sk-the-right-one"  # the 401 message echoes the offered key
    else:
        action = {
            "status_429": stub_actions.Status(429, message=f"slow down {PLANTED}", retry_after="0"),
            "status_500": stub_actions.Status(500, message=f"boom for key {PLANTED}"),
            "timeout": stub_actions.Hang(),
            "closed": stub_actions.Close(),
            "garbage": stub_actions.Garbage(body=f"<html>{PLANTED}</html>".encode()),
        }[scenario]
        openai_stub.script(action, action)
    client = DirectOpenAIClient() if kind == "direct" else LiteLLMClient()
    retrying = with_retries(client, attempts=2, base_delay_s=0.0, max_delay_s=0.0)
    request = ChatRequest(
        model="stub" if kind == "direct" else "openai/stub",
        messages=MESSAGES,
        api_base=openai_stub.url,
        api_key=PLANTED,
        timeout_s=0.3,
    )
    try:
        with pytest.raises(TransportError) as info:
            await retrying.complete(request)
    finally:
        await retrying.aclose()
    assert openai_stub.requests[0].headers["Authorization"] == f"Bearer {PLANTED}"  # it was sent
    captured = capsys.readouterr()
    if kind == "litellm":
        assert "litellm.acompletion" in caplog.text  # litellm's debug log was captured
    for text in (_all_text(info.value), caplog.text, captured.out, captured.err, repr(request), repr(client)):
        assert PLANTED not in text


def test_request_repr_hides_the_key():
    request = ChatRequest(model="m", messages=MESSAGES, api_key=PLANTED)
    assert PLANTED not in repr(request)
    assert PLANTED not in str(request)
    assert request.api_key is not None and request.api_key.get_secret_value() == PLANTED


def test_litellm_client_reaches_no_network_when_built(tmp_path):
    """Importing litellm through our client must not fetch the remote price map (or anything)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(
        "import socket\n"
        "attempts = []\n"
        "real_connect = socket.socket.connect\n"
        "def guarded(self, address):\n"
        "    attempts.append(address)\n"
        "    raise OSError('network disabled in this test')\n"
        "socket.socket.connect = guarded\n"
        "real_getaddrinfo = socket.getaddrinfo\n"
        "def guarded_dns(*args, **kwargs):\n"
        "    attempts.append(args[0])\n"
        "    raise OSError('dns disabled in this test')\n"
        "socket.getaddrinfo = guarded_dns\n"
        "from judgefuse.judges.transport import LiteLLMClient\n"
        "from judgefuse.judges.transport import pricing\n"
        "LiteLLMClient()\n"
        "assert pricing.token_prices('gpt-4o-mini')[0] > 0\n"
        "print('ATTEMPTS', attempts)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ATTEMPTS []" in result.stdout
