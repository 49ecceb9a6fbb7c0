"""Single-flight idempotency: identical requests with one ``id`` in flight at once get one verdict
from one set of judge calls (counted at the stub), on every backend, and across two gateway
replicas sharing one Redis or one PostgreSQL; a different item under that id is still a 409.

The adversarial run found 30 concurrent identical requests answered 18 x 200 and 12 x 409 on
SQLite, with the judges called twice.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from jf_test_support import app_support as S

from judgefuse.service.storage import Storage
from judgefuse.service.storage.redis import RedisStorage

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
A = S.auth("tenant-a")
SLOW_S = 0.3
"""Each judge's reply delay: long enough that every request below arrives while the first is judging."""


def slow_judges(script: S.Script, *, choice: str = "A", confidence: int = 90) -> None:
    for j in S.JUDGES:
        script.set(j, action=S.stub_module.Reply(texts=S.sc_text(choice, confidence), delay_s=SLOW_S))


async def test_30_concurrent_identical_requests_get_one_verdict_from_one_set_of_calls(storage, stub, tmp_path):
    server, script = stub
    slow_judges(script)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings, storage) as (app, client):
        body = {**PAIR, "id": "retry-me"}
        responses = await asyncio.gather(*(client.post("/v1/judge", json=body, headers=A) for _ in range(30)))
        statuses = [r.status_code for r in responses]
        print(f"\n30 concurrent identical requests ({type(storage).__name__}): "
              f"{statuses.count(200)} x 200, {len(statuses) - statuses.count(200)} other; "
              f"{len(server.requests)} judge calls (one set = {len(S.JUDGES)})")
        assert statuses == [200] * 30, [r.text for r in responses if r.status_code != 200][:2]
        assert len(server.requests) == len(S.JUDGES)
        verdicts = [r.json() for r in responses]
        assert {(v["id"], v["choice"], v["confidence"], v["created_at"]) for v in verdicts} == {
            (verdicts[0]["id"], "A", verdicts[0]["confidence"], verdicts[0]["created_at"])}
        assert app.state.gateway.judging.single_flight.in_flight() == 0
        # after the flight: a retry replays from storage, still no judge call
        again = await client.post("/v1/judge", json=body, headers=A)
        assert again.status_code == 200 and again.json()["created_at"] == verdicts[0]["created_at"]
        assert len(server.requests) == len(S.JUDGES)


async def test_a_different_item_under_an_id_in_flight_is_409(storage, stub, tmp_path):
    server, script = stub
    slow_judges(script)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings, storage) as (_app, client):
        first = asyncio.create_task(client.post("/v1/judge", json={**PAIR, "id": "x1"}, headers=A))
        await asyncio.sleep(SLOW_S / 3)
        other = await client.post("/v1/judge", json={**PAIR, "id": "x1", "answer_b": "6"}, headers=A)
        assert other.status_code == 409, other.text
        assert other.json()["fields"] == [{"field": "body.id", "problem": "already used"}]
        assert (await first).status_code == 200
        assert len(server.requests) == len(S.JUDGES)


async def test_a_joiner_with_a_label_gets_its_label_applied(storage, stub, tmp_path):
    server, script = stub
    slow_judges(script)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings, storage) as (_app, client):
        plain, labelled = await asyncio.gather(
            client.post("/v1/judge", json={**PAIR, "id": "lab"}, headers=A),
            client.post("/v1/judge", json={**PAIR, "id": "lab", "label": "B"}, headers=A),
        )
        assert plain.status_code == labelled.status_code == 200, (plain.text, labelled.text)
        assert len(server.requests) == len(S.JUDGES)
        stored = (await client.get("/v1/verdicts/lab", headers=A)).json()
        assert stored["label"] == "B"


async def test_joiners_of_a_failed_request_get_its_error_without_calling_again(storage, stub, tmp_path):
    server, script = stub
    for j in S.JUDGES:
        script.set(j, action=S.stub_module.Status(500))
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings, storage) as (_app, client):
        responses = await asyncio.gather(
            *(client.post("/v1/judge", json={**PAIR, "id": "doomed"}, headers=A) for _ in range(10)))
        assert [r.status_code for r in responses] == [503] * 10
        # one set of calls, unless the first failed before the last joined (then a second leader)
        assert len(server.requests) in (len(S.JUDGES), 2 * len(S.JUDGES))


@pytest.fixture(params=["redis", "postgres"])
async def shared_url(request: pytest.FixtureRequest) -> str:
    """An emptied store that several replicas (storage handles) can share: its URL."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        store = RedisStorage(url)
        async with store:
            await store.client.flushdb()
        return url
    from jf_test_support.pg_server import reset_postgres

    url = request.getfixturevalue("postgres_url")
    await reset_postgres(url)
    return url


def shared_store(url: str) -> Storage:
    from judgefuse.service.storage import storage_from_url

    return storage_from_url(url)


async def test_two_replicas_on_one_store_judge_an_id_once(shared_url, stub, tmp_path):
    server, script = stub
    slow_judges(script)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], storage_url=shared_url)
    first, second = shared_store(shared_url), shared_store(shared_url)
    await first.open()
    await second.open()
    try:
        async with S.running_app(settings, first) as (app1, c1), S.running_app(settings, second) as (app2, c2):
            assert app1.state.gateway.judging.single_flight.owner != app2.state.gateway.judging.single_flight.owner
            body = {**PAIR, "id": "across"}
            responses = await asyncio.gather(*(
                (c1 if i % 2 else c2).post("/v1/judge", json=body, headers=A) for i in range(30)))
            statuses = [r.status_code for r in responses]
            print(f"\ntwo replicas, 30 concurrent identical requests: {statuses.count(200)} x 200; "
                  f"{len(server.requests)} judge calls (one set = {len(S.JUDGES)})")
            assert statuses == [200] * 30, [r.text for r in responses if r.status_code != 200][:2]
            assert len(server.requests) == len(S.JUDGES)
            assert len({r.json()["created_at"] for r in responses}) == 1
            assert not await first.verdict_id_claimed("tenant-a", "across")  # released
    finally:
        await first.close()
        await second.close()


async def test_a_claim_left_by_a_dead_replica_lapses_and_the_id_is_judged(shared_url, stub, tmp_path):
    server, script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], storage_url=shared_url)
    storage = shared_store(shared_url)
    await storage.open()
    try:
        assert await storage.claim_verdict_id("tenant-a", "orphan", "dead-replica", 0.6)
        assert not await storage.claim_verdict_id("tenant-a", "orphan", "someone-else", 0.6)
        async with S.running_app(settings, storage) as (_app, client):
            started = time.perf_counter()
            r = await client.post("/v1/judge", json={**PAIR, "id": "orphan"}, headers=A)
            waited = time.perf_counter() - started
        assert r.status_code == 200, r.text
        assert waited >= 0.4, waited
        assert len(server.requests) == len(S.JUDGES)
    finally:
        await storage.close()


async def test_claims_are_leases_owned_by_one_replica(shared_url):
    storage = shared_store(shared_url)
    await storage.open()
    try:
        assert await storage.claim_verdict_id("tenant-a", "c", "r1", 5)
        assert await storage.claim_verdict_id("tenant-a", "c", "r1", 5)  # its own: renewed
        assert not await storage.claim_verdict_id("tenant-a", "c", "r2", 5)
        assert await storage.claim_verdict_id("tenant-b", "c", "r2", 5)  # another tenant: free
        await storage.release_verdict_id("tenant-a", "c", "r2")  # not r2's: kept
        assert await storage.verdict_id_claimed("tenant-a", "c")
        await storage.release_verdict_id("tenant-a", "c", "r1")
        assert not await storage.verdict_id_claimed("tenant-a", "c")
        assert await storage.claim_verdict_id("tenant-a", "c", "r2", 0.05)
        await asyncio.sleep(0.15)
        assert not await storage.verdict_id_claimed("tenant-a", "c")  # lapsed
    finally:
        await storage.close()


@pytest.mark.parametrize("kwargs", [{"ttl_s": 0}, {"poll_s": 0}, {"poll_s": 1, "max_poll_s": 0.5}])
def test_single_flight_refuses_meaningless_timings(kwargs):
    from judgefuse.service.judging.single_flight import SingleFlight
    from judgefuse.service.storage import SQLiteStorage

    with pytest.raises(ValueError, match="single flight"):
        SingleFlight(SQLiteStorage(":memory:"), **kwargs)


async def test_a_cancelled_leader_hands_the_flight_to_a_waiting_joiner(tmp_path):
    from judgefuse.service.judging.single_flight import SingleFlight
    from judgefuse.service.storage import SQLiteStorage

    async with SQLiteStorage(tmp_path / "sf.db") as storage:
        flights: SingleFlight[str] = SingleFlight(storage)
        ran: list[str] = []

        async def work(name: str) -> str:
            ran.append(name)
            await asyncio.sleep(0.2)
            return name

        leader = asyncio.create_task(flights.run("t", "id", "same", lambda: work("leader")))
        await asyncio.sleep(0.02)
        joiner = asyncio.create_task(flights.run("t", "id", "same", lambda: work("joiner")))
        await asyncio.sleep(0.02)
        leader.cancel()
        assert await joiner == ("joiner", True)  # it led the retry itself
        assert leader.cancelled() and ran == ["leader", "joiner"]
        assert flights.in_flight() == 0

        async def fails() -> str:
            await asyncio.sleep(0.05)
            raise RuntimeError("judges down")

        first = asyncio.create_task(flights.run("t", "id2", "same", fails))
        await asyncio.sleep(0.01)
        with pytest.raises(RuntimeError, match="judges down"):
            await flights.run("t", "id2", "same", lambda: work("never"))
        with pytest.raises(RuntimeError):
            await first
        assert "never" not in ran
