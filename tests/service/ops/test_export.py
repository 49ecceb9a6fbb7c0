"""``judgefuse export``: labelled live traffic out of storage as votes JSONL.

The end-to-end claim: the gateway judges items on the stub panel (real HTTP to the OpenAI
stub), some verdicts get labels, the export evaluates with ``judgefuse eval`` and gives the
same per-judge accuracy as the labels stored (computed here from the stored records), and the
review stratum and inclusion probability round-trip. Then what the command promises: filters,
items stored without their item skipped and counted, several tenants, an atomic file, errors.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from jf_test_support import app_support as S
from jf_test_support import openai_stub as stub_module
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel, put_threshold
from jf_test_support.storage_support import T0, make_record

from judgefuse.cli import main as cli_main
from judgefuse.evaluation.loaders.votes import read_votes
from judgefuse.service.storage import SQLiteStorage, VerdictRecord


async def main(argv: list[str]) -> int:
    """The console script, on a thread: it runs its own event loop (asyncio.run)."""
    return await asyncio.to_thread(cli_main, argv)


def answers(model: str, text: str) -> tuple[str, int] | str | None:
    """Judge answers by question number: j1 mostly A, j2 follows the parity, j3 unreadable on
    every fifth item (an invalid vote, scored as not correct)."""
    marker = next((w for w in text.split() if w.startswith("Q#")), None)
    if marker is None:
        return None
    n = int(marker[2:].strip(".?,"))
    if model == "j1":
        return ("A" if n % 7 else "B", 70 + n % 25)
    if model == "j2":
        return ("A" if n % 2 else "B", 60 + n % 30)
    if n % 5 == 0:
        return None  # falls back to the fixed answer set below: garbage
    return ("B" if n % 3 else "A", 80)


def truth(n: int) -> str:
    return "A" if n % 4 else "B"


async def stored_accuracy(path: Path) -> dict[str, tuple[int, float]]:
    """Per judge: (labelled items, accuracy) from the stored records (an invalid vote is wrong)."""
    async with SQLiteStorage(path) as store:
        records: list[VerdictRecord] = await store.iter_labelled("tenant-a")
    out: dict[str, tuple[int, float]] = {}
    for judge in ("j1", "j2", "j3"):
        hits = [next(v for v in r.verdict.votes if v.judge == judge).choice == r.label
                for r in records]
        out[judge] = (len(hits), sum(hits) / len(hits))
    return out


async def test_export_of_labelled_traffic_evaluates_to_the_stored_accuracy(stub, tmp_path):  # noqa: F811
    server, script = stub
    script.by_question = answers
    script.set("j3", action=stub_module.Reply(texts="this is not JSON at all"))
    db = tmp_path / "live.sqlite3"
    panel = S.panel_yaml(tmp_path, server.url, quorum=1)
    settings = S.make_settings(tmp_path, [panel], storage_url=f"sqlite:///{db}", review_seed=4)
    async with S.running_app(settings) as (_app, client):
        for n in range(40):
            body = {"question": f"Question Q#{n} ?", "answer_a": "yes", "answer_b": "no"}
            r = await client.post("/v1/judge", json=body, headers=H)
            assert r.status_code == 200, r.text
            if n % 8 != 7:  # 35 of 40 get a label
                vid = r.json()["id"]
                f = await client.post("/v1/feedback", json={"verdict_id": vid, "label": truth(n)},
                                      headers=H)
                assert f.status_code == 200
    expected = await stored_accuracy(db)
    assert {n for n, _ in expected.values()} == {35}
    assert len({round(acc, 6) for _, acc in expected.values()}) == 3  # three different judges

    out = tmp_path / "export" / "live.jsonl"
    assert await main(["export", "--storage", f"sqlite:///{db}", "--tenant", "tenant-a",
                 "--labelled-only", "--quiet", str(out)]) == 0
    report = tmp_path / "eval.json"
    assert await main(["eval", str(out), "--json", str(report), "--quiet", "--bootstrap", "20"]) == 0
    rows = {row["name"]: row for row in json.loads(report.read_text())["rows"]}
    for judge, (n, accuracy) in expected.items():
        assert rows[judge]["n"] == n
        assert rows[judge]["accuracy"] == pytest.approx(accuracy, abs=1e-12), judge
        print(f"{judge}: eval on the export {rows[judge]['accuracy']:.4f} = stored {accuracy:.4f} "
              f"({n} labels)")
    # compare and tune read it as is
    assert await main(["compare", str(out), "--judges", "j1", "j2", "--bootstrap", "20"]) == 0
    assert await main(["tune", str(out), "--min-count", "5", "--judge", "j1"]) == 0

    # the stamps round-trip: stratum, inclusion probability, and the verdict's fields
    items = read_votes(out)
    async with SQLiteStorage(db) as store:
        for judged in items:
            meta = judged.item.metadata["judgefuse"]
            record = await store.get_verdict("tenant-a", meta["verdict_id"])
            assert record is not None and record.review is not None
            assert judged.item.id == record.id and judged.item.label == record.label
            assert meta["stratum"] == record.review.stratum
            assert meta["inclusion_probability"] == record.review.inclusion_probability
            assert meta["created_at"] == record.created_at
            assert meta["fused"]["choice"] == record.verdict.choice
            assert judged.votes == record.verdict.votes
    assert [j.item.metadata["judgefuse"]["created_at"] for j in items] == sorted(
        j.item.metadata["judgefuse"]["created_at"] for j in items)


async def test_export_strata_filters_and_every_tenant(storage, tmp_path, capsys):
    """On each backend: the review strata of /v1/fuse traffic land in the export; --panel,
    --since/--until and --labelled-only filter; without --tenant every tenant is exported
    with tenant/id item ids."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.5)], review_seed=9)
    await put_threshold(storage)
    async with S.running_app(settings, storage) as (_app, client):
        for i in range(12):
            body = {**PAIR, "id": f"x{i}", "votes": SPLIT if i % 3 == 0 else UNANIMOUS}
            assert (await client.post("/v1/fuse", json=body, headers=H)).status_code == 200
            await client.post("/v1/feedback", json={"verdict_id": f"x{i}", "label": "A"}, headers=H)
        for i in range(3):
            await client.post("/v1/fuse", json={**PAIR, "id": f"x{i}", "votes": UNANIMOUS},
                              headers=S.auth("tenant-b"))
    records = [r async for r in storage.iter_records()]
    url = storage.path if isinstance(storage, SQLiteStorage) else storage._url  # noqa: SLF001
    out = tmp_path / "all.jsonl"
    assert await main(["export", "--storage", str(url), str(out)]) == 0
    assert "exported 15 records (12 labelled)" in capsys.readouterr().err
    items = read_votes(out)
    assert [j.item.id for j in items] == [f"{r.tenant}/{r.id}" for r in records]
    strata = {j.item.id: j.item.metadata["judgefuse"]["stratum"] for j in items}
    stored = {f"{r.tenant}/{r.id}": r.review.stratum for r in records if r.review}
    assert strata == stored and {"review", "audit"} <= set(strata.values())
    mid = sorted(r.created_at for r in records)[5]
    cases = [
        (["--tenant", "tenant-b"], [r for r in records if r.tenant == "tenant-b"]),
        (["--since", repr(mid)], [r for r in records if r.created_at >= mid]),
        (["--until", repr(mid), "--labelled-only"],
         [r for r in records if r.created_at < mid and r.label is not None]),
        (["--panel", "nope"], []),
    ]
    for flags, want in cases:
        assert await main(["export", "--storage", str(url), "--quiet", *flags, str(out)]) == 0
        got = [j.item.metadata["judgefuse"]["verdict_id"] for j in read_votes(out)] if want else []
        assert got == [r.id for r in want], flags
        if not want:
            assert out.read_text() == ""


async def test_records_without_item_are_skipped_and_counted(tmp_path, capsys):
    db = tmp_path / "s.sqlite3"
    async with SQLiteStorage(db) as store:
        for n in range(5):
            await store.save_verdict("acme", make_record(f"v{n}", created_at=T0 + n,
                                                         with_item=n % 2 == 0))
    out = tmp_path / "o.jsonl"
    assert await main(["export", "--storage", str(db), str(out)]) == 0
    err = capsys.readouterr().err
    assert "exported 3 records" in err and "skipped 2 records stored without their item" in err
    assert [j.item.id for j in read_votes(out)] == ["acme/v0", "acme/v2", "acme/v4"]


async def test_export_is_atomic_and_errors_are_clear(tmp_path, capsys):
    db = tmp_path / "s.sqlite3"
    async with SQLiteStorage(db) as store:
        for n in range(30):
            await store.save_verdict("acme", make_record(f"v{n:02d}", created_at=T0 + n))
    with sqlite3.connect(db) as conn:  # a corrupt record in the middle of the scan
        conn.execute("UPDATE verdicts SET body = '{\"id\": 1}' WHERE id = 'v20'")
    out = tmp_path / "keep.jsonl"
    out.write_text("previous export\n")
    assert await main(["export", "--storage", str(db), "--quiet", "--batch-size", "5", str(out)]) == 1
    assert "stored verdict record is invalid" in capsys.readouterr().err
    assert out.read_text() == "previous export\n"  # untouched
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # temp file gone
    # usage errors: exit 2, naming the flag
    assert await main(["export", "--storage", str(tmp_path / "missing.db"), str(out)]) == 2
    assert "no SQLite file" in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()  # not created empty
    assert await main(["export", "--storage", str(db), "--since", "yesterday", str(out)]) == 2
    assert "ISO 8601" in capsys.readouterr().err
    assert await main(["export", "--storage", str(db), "--since", "2026-01-02", "--until",
                 "2026-01-01", str(out)]) == 2
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        assert await main(["export", "--storage", str(db), "--format", "parquet", str(out)]) == 2
        assert "judgefuse[parquet]" in capsys.readouterr().err


def test_parse_time() -> None:
    from judgefuse.service.commands.export import parse_time

    assert parse_time("1700000000") == 1_700_000_000.0
    assert parse_time("2026-11-01") == parse_time("2026-11-01T00:00:00+00:00") == 1_793_491_200.0
    assert parse_time("2026-11-01T01:00:00+01:00") == 1_793_491_200.0
