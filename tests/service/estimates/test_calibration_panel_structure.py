"""``GET /v1/calibration``'s ``panel_structure``: each judge's label-free (Dawid-Skene) accuracy
next to its labelled accuracy, and the effective number of independent judges, checked against
a hand computation on twelve posted items."""

from __future__ import annotations

import pytest
from jf_test_support import app_support as S
from jf_test_support import panel_support as P

from judgefuse.fusion.dawid_skene import DawidSkeneFusion
from judgefuse.judges.types import JudgeVote

# which items each external judge gets wrong (12 items, every one labelled)
WRONG = {"e1": {0, 1, 2}, "e2": {0, 1, 3}, "e3": {0, 2, 4}}
N = 12


def pearson(x: list[int], y: list[int]) -> float:
    """By hand: covariance over the product of standard deviations."""
    mx, my = sum(x) / len(x), sum(y) / len(y)
    cov = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / len(x)
    sx = (sum((a - mx) ** 2 for a in x) / len(x)) ** 0.5
    sy = (sum((b - my) ** 2 for b in y) / len(y)) ** 0.5
    return cov / (sx * sy)


def choices(i: int) -> tuple[str, dict[str, str]]:
    label = "A" if i % 2 == 0 else "B"
    other = "B" if label == "A" else "A"
    return label, {j: (other if i in wrong else label) for j, wrong in WRONG.items()}


def panel_with_a_silent_judge(tmp_path):
    """The external panel plus e4, which never votes here (listed with no estimates)."""
    path = P.external_panel(tmp_path)
    path.write_text(path.read_text(encoding="utf-8") + "  - {name: e4, external: true}\n", encoding="utf-8")
    return path


async def test_panel_structure_matches_a_hand_computation(tmp_path):
    settings = S.make_settings(tmp_path, [panel_with_a_silent_judge(tmp_path)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", panel_structure_ttl_s=0)
    async with S.running_app(settings) as (_app, client):
        empty = (await client.get("/v1/calibration", headers=P.H)).json()
        assert empty["panel_structure"] is None
        for i in range(N):
            label, said = choices(i)
            votes = [{"judge": j, "choice": c, "confidence": 0.8} for j, c in said.items()]
            r = await client.post("/v1/fuse", json={**P.PAIR, "id": f"i{i}", "votes": votes, "label": label},
                                  headers=P.H)
            assert r.status_code == 200, r.text
        r = await client.get("/v1/calibration", params={"population": "false"}, headers=P.H)
        assert r.status_code == 200, r.text
        body = r.json()["panel_structure"]
        skipped = (await client.get("/v1/calibration", params={"structure": "false"}, headers=P.H)).json()
        assert skipped["panel_structure"] is None

    assert (body["n_items"], body["n_labelled"]) == (N, N)
    judges = {e["judge"]: e for e in body["judges"]}
    assert sorted(judges) == ["e1", "e2", "e3", "e4"]
    assert judges.pop("e4") == {"judge": "e4", "n_votes": 0, "estimated_accuracy": None,
                                "labelled_accuracy": None, "n_labelled_observations": 0}
    for name, wrong in WRONG.items():
        assert judges[name]["labelled_accuracy"] == pytest.approx(1 - len(wrong) / N)  # 9/12
        assert judges[name]["n_votes"] == N and judges[name]["n_labelled_observations"] == N

    # labelled: errors against the label
    err = {j: [int(i in wrong) for i in range(N)] for j, wrong in WRONG.items()}
    rhos = [pearson(err["e1"], err["e2"]), pearson(err["e1"], err["e3"]), pearson(err["e2"], err["e3"])]
    assert rhos == pytest.approx([5 / 9, 5 / 9, 1 / 9])
    rho = sum(rhos) / 3
    assert body["error_correlation_labelled"] == pytest.approx(rho)
    assert body["effective_judges_labelled"] == pytest.approx(3 / (1 + 2 * rho))  # 1.653
    print(f"labelled: rho {rho:.4f}, k_eff {3 / (1 + 2 * rho):.4f} of 3")

    # label-free: errors against the consensus (here the majority of the three votes; item 0,
    # where all three err, has a consensus that agrees with every vote). e1 never leaves the
    # consensus, so only the pair (e2, e3) varies and qualifies.
    consensus = []
    for i in range(N):
        _label, said = choices(i)
        letters = list(said.values())
        consensus.append(max("AB", key=letters.count))
    free = {j: [int(choices(i)[1][j] != consensus[i]) for i in range(N)] for j in WRONG}
    assert sum(free["e1"]) == 0
    rho_free = pearson(free["e2"], free["e3"])
    assert rho_free == pytest.approx(-0.2)
    assert body["error_correlation_unlabelled"] == pytest.approx(rho_free)
    assert body["effective_judges_unlabelled"] == pytest.approx(3.0)  # rho clipped at 0

    # the label-free accuracy is Dawid-Skene's on these votes, labels unused
    batches = [[JudgeVote(judge=j, mode="recorded", choice=c, confidence=0.8) for j, c in choices(i)[1].items()]
               for i in range(N)]
    expected = DawidSkeneFusion().fit_unlabelled(batches).estimated_accuracy
    for name in WRONG:
        assert judges[name]["estimated_accuracy"] == pytest.approx(expected[name])


async def test_panel_structure_is_reused_for_its_ttl(tmp_path):
    """The Dawid-Skene refit behind panel_structure is computed once per panel_structure_ttl_s:
    verdicts posted within the interval do not show until it ends."""
    settings = S.make_settings(tmp_path, [P.external_panel(tmp_path)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", panel_structure_ttl_s=3600)
    async with S.running_app(settings) as (app, client):
        async def structure():
            return (await client.get("/v1/calibration", params={"population": "false"}, headers=P.H)).json()[
                "panel_structure"]

        for i in range(4):
            label, said = choices(i)
            votes = [{"judge": j, "choice": c, "confidence": 0.8} for j, c in said.items()]
            r = await client.post("/v1/fuse", json={**P.PAIR, "id": f"i{i}", "votes": votes, "label": label},
                                  headers=P.H)
            assert r.status_code == 200, r.text
        first = await structure()
        assert first["n_items"] == 4
        for i in range(4, N):
            label, said = choices(i)
            votes = [{"judge": j, "choice": c, "confidence": 0.8} for j, c in said.items()]
            await client.post("/v1/fuse", json={**P.PAIR, "id": f"i{i}", "votes": votes}, headers=P.H)
        assert (await structure()) == first  # within the ttl: the cached answer
        app.state.gateway.panel_structure.ttl_s = 0
        assert (await structure())["n_items"] == N  # after it: recomputed
