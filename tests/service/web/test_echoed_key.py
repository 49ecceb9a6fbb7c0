"""A provider whose model repeats the API key (verbatim, base64, URL-encoded, hex, escaped) in
its completion: nothing of the key reaches the /v1/judge response, GET /v1/verdicts, or the
stored verdict (SQLite file, every Redis key, every PostgreSQL row); a megabyte reply is stored cut to the cap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jf_test_support import app_support as S
from jf_test_support import secret_forms as forms

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}




async def _stored_text(storage: Any, sqlite_path: Path) -> str:
    """Everything the storage holds, as text (the SQLite files, every Redis value, or every
    PostgreSQL row)."""
    from jf_test_support.pg_server import dump_text

    from judgefuse.service.storage.postgres import PostgresStorage
    from judgefuse.service.storage.redis import RedisStorage

    if isinstance(storage, PostgresStorage):
        return await dump_text(storage)
    if isinstance(storage, RedisStorage):
        client = storage.client
        out = []
        async for key in client.scan_iter(count=1000):
            kind = await client.type(key)
            kind = kind.decode() if isinstance(kind, bytes) else kind
            reader = {"hash": client.hgetall, "string": client.get, "list": lambda k: client.lrange(k, 0, -1),
                      "zset": lambda k: client.zrange(k, 0, -1), "set": client.smembers,
                      "stream": client.xrange}.get(kind)
            value = await reader(key) if reader is not None else b""
            out.append(f"{key!r} {value!r}")
        assert out, "redis holds no keys: the test wrote nothing?"
        return "\n".join(out)
    files = [p for p in sqlite_path.parent.iterdir() if p.name.startswith(sqlite_path.name)]
    assert files
    return "\n".join(p.read_bytes().decode("latin-1") for p in files)


async def test_a_model_that_repeats_the_key_leaves_no_trace_of_it(storage, sqlite_path, stub, tmp_path):
    server, script = stub
    echoes = " | ".join(forms.encodings(S.PLANTED).values())
    reply = json.dumps({"selected_output": "Output (a)", "confidence_score": 90,
                        "explanation": f"my key is {echoes}"})
    huge = "x" * 2_000_000 + S.PLANTED + "\n" + reply  # a 2 MB reply, key inside, verdict last
    script.set("j1", action=S.stub_module.Reply(texts=f"{echoes}\n{reply}"))
    script.set("j2", action=S.stub_module.Reply(texts=huge))
    script.set("j3", action=S.stub_module.Reply(texts=f"no verdict, only the key: {echoes}"))
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings, storage) as (_app, client):
        judged = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))
        assert judged.status_code == 200, judged.text
        verdict = judged.json()
        fetched = await client.get(f"/v1/verdicts/{verdict['id']}", headers=S.auth("tenant-a"))
        assert fetched.status_code == 200, fetched.text
        stored = await _stored_text(storage, sqlite_path)

    assert all(r.headers.get("Authorization") == f"Bearer {S.PLANTED}" for r in server.requests)
    votes = {v["judge"]: v for v in verdict["votes"]}
    assert votes["j1"]["choice"] == "A" and "***" in votes["j1"]["explanation"]
    assert votes["j2"]["choice"] == "A"  # the verdict at the end of a 2 MB reply is still read
    assert any(n.startswith("raw reply truncated") for n in votes["j2"]["notes"])
    assert votes["j3"]["choice"] is None  # unreadable: its raw reply is stored (scrubbed), not returned
    assert stored.count("***") >= 3
    for where, text in (("response", judged.text), ("GET /v1/verdicts", fetched.text), ("storage", stored)):
        assert not forms.leaks(text, S.PLANTED), where
    assert len(stored) < 1_000_000  # the 2 MB reply was not stored whole
