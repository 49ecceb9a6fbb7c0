"""A planted API key never shows in an exception, its chain, a repr, a log line, a completion
text or a vote: verbatim, encoded (base64, URL, hex, escapes) or as a fragment left by a cut."""

from __future__ import annotations

import base64
import json
import logging
import sys
import traceback

import pytest
from jf_test_support import secret_forms
from pydantic import SecretStr

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.transport import (
    ChatRequest,
    DirectOpenAIClient,
    LiteLLMClient,
    MalformedResponse,
    TransportError,
    with_retries,
)
from judgefuse.judges.transport.errors import redact
from judgefuse.judges.types import PairwiseItem

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


# ------------------------------------------------------------------ a provider that echoes the key
_encodings = secret_forms.encodings


def _leaks(text: str, secret: str = PLANTED) -> list[str]:
    return secret_forms.leaks(text, secret)


def test_the_leak_detector_sees_every_encoding():
    """The checker used below is not blind: each planted form is found before scrubbing."""
    for name, form in _encodings(PLANTED).items():
        assert _leaks(f"noise {form} noise"), name


@pytest.mark.parametrize("kind", ["direct", "litellm"])
async def test_a_key_echoed_in_completion_text_is_scrubbed_in_every_encoding(kind, openai_stub, stub_actions):
    forms = _encodings(PLANTED)
    texts = [f"the key is {form}, again: {form}." for form in forms.values()]
    openai_stub.script(stub_actions.Reply(texts=texts))
    client = DirectOpenAIClient() if kind == "direct" else LiteLLMClient()
    request = ChatRequest(
        model="stub" if kind == "direct" else "openai/stub",
        messages=MESSAGES,
        api_base=openai_stub.url,
        api_key=PLANTED,
        n=len(texts),
    )
    try:
        response = await client.complete(request)
    finally:
        await client.aclose()
    assert len(response.texts) == len(forms)
    for name, text in zip(forms, response.texts, strict=True):
        assert "***" in text and text.startswith("the key is ") and text.endswith("."), (name, text)
        assert not _leaks(text), (name, text)


@pytest.mark.parametrize(
    "body",
    [
        b"x" * 70 + PLANTED.encode() + b" " + b"y" * 200,  # the key straddles the 80-byte cut
        b"<html>" + b"z" * 66 + PLANTED.encode()[:14],  # the source itself truncated the key
        b"<html>" + base64.b64encode(b"u:" + PLANTED.encode()) * 20,  # encoded, long
    ],
    ids=["straddles_cut", "truncated_by_source", "base64_repeated"],
)
async def test_a_non_json_2xx_body_longer_than_the_excerpt_leaks_no_part_of_the_key(body, openai_stub, stub_actions):
    openai_stub.script(stub_actions.Garbage(body=body))
    client = DirectOpenAIClient()
    request = ChatRequest(model="stub", messages=MESSAGES, api_base=openai_stub.url, api_key=PLANTED)
    try:
        with pytest.raises(MalformedResponse) as info:
            await client.complete(request)
    finally:
        await client.aclose()
    text = _all_text(info.value)
    assert "not JSON" in str(info.value) and "***" in str(info.value)
    assert not _leaks(text), text


def test_redact_scrubs_before_cutting_and_leaves_no_fragment():
    for offset in range(60, 90):
        cut = redact("a" * offset + PLANTED + " tail", PLANTED, limit=80)
        assert not _leaks(cut), (offset, cut)
        assert len(cut) <= 80 + len("***...")
    assert redact("short text", PLANTED) == "short text"
    assert redact("placeholder none here", "none") == "placeholder *** here"  # short secret: verbatim only
    assert redact("None of it", "none") == "None of it"


# ------------------------------------------------------------------ votes: the one finalising place
def _sc(explanation: str) -> str:
    return json.dumps({"selected_output": "Output (a)", "confidence_score": 80, "explanation": explanation})


def _vote_text(vote) -> str:
    return vote.model_dump_json()


@pytest.mark.parametrize("mode", ["sc", "mp", "sc+swap"])
async def test_a_judge_whose_model_repeats_the_key_casts_a_vote_without_it(mode, openai_stub, stub_actions):
    """Completion text, explanation, raw reply, notes: nothing of the key in any encoding.

    The client is injected *without* the key, so the transport cannot scrub: the vote's
    finaliser must (it knows the judge's key), whatever the mode.
    """
    forms = list(_encodings(PLANTED).values())
    explanation = "I was told " + " / ".join(forms)
    openai_stub.default = stub_actions.Reply(texts=_sc(explanation))
    config = JudgeConfig(
        name="echo",
        model="stub",
        api_base=openai_stub.url,
        mode="sc" if mode != "mp" else "mp",
        samples=3,
        position_swap=mode == "sc+swap",
    )
    judge = Judge(config, api_key=SecretStr(PLANTED), client=DirectOpenAIClient(api_base=openai_stub.url))
    async with judge:
        vote = await judge.vote(PairwiseItem(id="1", question="q", answer_a="a", answer_b="b"))
    assert vote.valid or mode == "sc+swap", vote  # the swapped order picks the other answer: a tie
    assert "***" in vote.explanation and "***" in vote.raw
    assert not _leaks(_vote_text(vote)), _vote_text(vote)[:2000]


async def test_judge_chat_scrubs_the_fusers_completion_text(openai_stub, stub_actions):
    openai_stub.script(stub_actions.Reply(texts=_sc(f"key {PLANTED} and {base64.b64encode(PLANTED.encode()).decode()}")))
    config = JudgeConfig(name="fuser", model="stub", api_base=openai_stub.url)
    judge = Judge(config, api_key=SecretStr(PLANTED), client=DirectOpenAIClient(api_base=openai_stub.url))
    async with judge:
        response = await judge.chat(MESSAGES)
    assert "***" in response.texts[0] and not _leaks(response.texts[0])


@pytest.mark.parametrize("mode", ["sc", "mp"])
async def test_a_raw_reply_over_the_cap_is_cut_and_noted(mode, openai_stub, stub_actions):
    cap = 1024
    # 3 MB of prose, then the verdict; in both the reply and its explanation the key starts
    # right before the cut: scrub first, then cut, and no fragment survives
    explanation = "x" * (cap - 60) + PLANTED + "y" * 30_000
    reply = "e" * (cap - 60) + PLANTED + "f" * 3_000_000 + "\n" + _sc(explanation)
    openai_stub.default = stub_actions.Reply(texts=reply)
    config = JudgeConfig(name="big", model="openai/stub", api_base=openai_stub.url, api_key_env="JF_KEY",
                         mode=mode, samples=2, max_raw_bytes=cap, timeout_s=30)
    judge = Judge.from_config(config, environ={"JF_KEY": PLANTED})
    async with judge:
        vote = await judge.vote(PairwiseItem(id="1", question="q", answer_a="a", answer_b="b"))
    assert vote.valid and vote.choice == "A"
    assert len(vote.raw.encode()) <= cap and len(vote.explanation.encode()) <= cap
    assert any(n.startswith("raw reply truncated: kept ") and "max_raw_bytes" in n for n in vote.notes), vote.notes
    assert any(n.startswith("explanation truncated: ") for n in vote.notes), vote.notes
    assert len(vote.model_dump_json()) < 4 * cap
    assert not _leaks(_vote_text(vote))


async def test_a_raw_reply_under_the_cap_is_kept_whole(openai_stub, stub_actions):
    text = _sc("short and fine")
    openai_stub.default = stub_actions.Reply(texts=text)
    config = JudgeConfig(name="small", model="openai/stub", api_base=openai_stub.url)
    async with Judge(config) as judge:
        vote = await judge.vote(PairwiseItem(id="1", question="q", answer_a="a", answer_b="b"))
    assert vote.raw == text and vote.explanation == "short and fine"
    assert not any("truncated" in n for n in vote.notes)
    assert config.max_raw_bytes == 16 * 1024  # the default


def test_max_raw_bytes_is_checked_with_the_field_named():
    with pytest.raises(ValueError, match="max_raw_bytes"):
        JudgeConfig(name="x", model="m", max_raw_bytes=10)


@pytest.mark.parametrize("noise", ["", "50% " * 20_000, "a\\nb " * 20_000], ids=["clean", "many_percent", "many_backslash"])
def test_escaped_forms_are_found_however_many_escapes_surround_them(noise):
    """The escape regex runs in windows around escapes, or over everything when they abound."""
    from judgefuse.judges.transport.redaction import scrubber_for

    escaped = {
        "percent": "".join(f"%{b:02x}" for b in PLANTED.encode()),
        "html_hex_zero_padded": "".join(f"&#x000{ord(c):x};" for c in PLANTED),
        "mixed": "".join(c if i % 2 else f"\\u{ord(c):04X}" for i, c in enumerate(PLANTED)),
    }
    scrubber = scrubber_for(PLANTED)
    for name, form in escaped.items():
        cleaned = scrubber.scrub(f"{noise}[{form}]{noise}")
        assert "[***]" in cleaned, name
        assert len(cleaned) == 2 * len(noise) + 5, name  # nothing else was touched


@pytest.mark.parametrize("kind", ["direct", "litellm"])
async def test_a_key_in_the_model_name_or_a_logprob_token_is_scrubbed(kind, openai_stub, stub_actions):
    """What the response cache stores besides the texts: the model name and the top tokens."""
    openai_stub.script(
        stub_actions.Reply(texts="A", model=f"echo-{PLANTED}", top_logprobs=[("A", -0.1), (PLANTED, -2.0)])
    )
    client = DirectOpenAIClient() if kind == "direct" else LiteLLMClient()
    request = ChatRequest(
        model="stub" if kind == "direct" else "openai/stub",
        messages=MESSAGES,
        api_base=openai_stub.url,
        api_key=PLANTED,
        logprobs=True,
        top_logprobs=2,
        max_tokens=1,
    )
    try:
        response = await client.complete(request)
    finally:
        await client.aclose()
    assert response.first_token_top_logprobs[0][0] == ("A", -0.1)
    assert response.first_token_top_logprobs[0][1][0] == "***"
    assert PLANTED not in response.model and PLANTED not in repr(response)


def test_a_vote_without_a_key_is_still_bounded_and_a_short_one_passes_untouched():
    """Without a key to scrub, ``finalise_vote`` returns a vote whose texts fit even at four
    bytes a character as it is (the same object), and still cuts one that does not fit: 300
    four-byte characters against a 1,024-byte cap (under the cap in characters, over in
    bytes), an error and a note over 2,048 bytes."""
    from judgefuse.judges.finalise import MAX_NOTE_BYTES, finalise_vote
    from judgefuse.judges.types import JudgeVote

    short = JudgeVote(judge="j", mode="sc", choice="A", confidence=0.9, raw="r" * 256,
                      explanation="e" * 256, notes=["n" * (MAX_NOTE_BYTES // 4)])
    assert finalise_vote(short, secrets=(None,), max_raw_bytes=1024) is short
    wide = short.model_copy(update={"raw": "\U0001f600" * 300, "notes": ["\u00e9" * 1100]})
    cut = finalise_vote(wide, secrets=(None,), max_raw_bytes=1024)
    assert len(cut.raw.encode()) <= 1024 < len(wide.raw.encode())
    assert cut.notes[0] != wide.notes[0] and len(cut.notes[0].encode()) <= MAX_NOTE_BYTES
    assert any(n.startswith("raw reply truncated: kept ") for n in cut.notes), cut.notes
    failed = JudgeVote.invalid("j", "sc", "x" * (MAX_NOTE_BYTES + 1))
    assert len(finalise_vote(failed, max_raw_bytes=1024).error.encode()) <= MAX_NOTE_BYTES
