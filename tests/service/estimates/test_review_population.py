"""Population estimates and tuning on the population, on both storage backends: a hand-built
stream posted through /v1/fuse with known votes and labels, whose /v1/calibration population
block must equal the stratified (N_s / n_s weighted) computation done here by hand, with the
unsolicited labels counted apart and left out."""

from __future__ import annotations

import math

import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel, put_threshold


def weighted(items: list[tuple[float, bool, float]]) -> dict[str, float]:
    """accuracy, Brier, ECE (10 bins) and TH (eps 0.1) of (confidence, correct, weight)."""
    total = sum(w for _, _, w in items)
    acc = sum(w * z for _, z, w in items) / total
    brier = sum(w * (c - z) ** 2 for c, z, w in items) / total
    bins: dict[int, list[float]] = {}
    for c, z, w in items:
        b = min(int(c * 10), 9)
        row = bins.setdefault(b, [0.0, 0.0])
        row[0] += w * (z - c)
        row[1] += w
    ece = sum(abs(gap) for gap, _ in bins.values()) / total
    th = 0.0
    for inside in (lambda c: c >= 0.9 - 1e-9, lambda c: c <= 0.1 + 1e-9):
        part = [(z, w) for c, z, w in items if inside(c)]
        weight = sum(w for _, w in part)
        if weight:
            th += 0.5 * (math.exp(sum(w * z for z, w in part) / weight - 0.5) - 1) * 100 * weight / total
    return {"accuracy": acc, "brier": brier, "ece": ece, "th_score": th}


async def test_population_block_equals_the_stratified_computation_by_hand(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.25)], review_seed=11)
    await put_threshold(storage)
    async with S.running_app(settings, storage) as (_app, client):
        review_ids, audit_ids, none_ids = [], [], []
        for i in range(40):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"r{i}", "votes": SPLIT}, headers=H)
            assert r.json()["review"]["stratum"] == "review"
            review_ids.append(f"r{i}")
        for i in range(200):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"a{i}", "votes": UNANIMOUS}, headers=H)
            (audit_ids if r.json()["review"]["stratum"] == "audit" else none_ids).append(f"a{i}")
        assert 20 <= len(audit_ids) <= 80
        labels = {}
        for i, vid in enumerate(review_ids[:30]):  # 30 of the 40 reviewed get a label
            labels[vid] = "A" if i % 5 < 3 else "B"
        for i, vid in enumerate(audit_ids):
            labels[vid] = "B" if i % 6 == 0 else "A"
        for vid in none_ids[:15]:  # unsolicited: all wrong, must not move the estimates
            labels[vid] = "B"
        for vid, label in labels.items():
            r = await client.post("/v1/feedback", json={"verdict_id": vid, "label": label}, headers=H)
            assert r.status_code == 200
        cal = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
        assert (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json() == cal
        # one more label: the memoised estimates must not hide it
        extra = review_ids[30]
        await client.post("/v1/feedback", json={"verdict_id": extra, "label": "B"}, headers=H)
        moved = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
        moved_pop = next(k for k in moved["keys"] if k["key"] == "method:majority:fused")["population"]
        assert moved_pop["labelled"]["review"] == 31
        before = next(k for k in cal["keys"] if k["key"] == "method:majority:fused")["population"]
        assert moved_pop["accuracy"]["estimate"] < before["accuracy"]["estimate"]
        # the hand computation below includes it
        labels[extra] = "B"
        review_labelled = review_ids[:31]
        cal = moved
    entry = next(k for k in cal["keys"] if k["key"] == "method:majority:fused")
    assert entry["sample"] == "labelled"
    pop = entry["population"]
    n_audit = len(audit_ids)
    assert pop["labelled"] == {"review": 31, "auto@0.25": n_audit}
    assert pop["represented"] == {"review": 40 / 240, "auto@0.25": 200 / 240}
    assert pop["unsolicited"] == {"labelled": 15, "in_estimates": False}
    assert pop["n_labels"] == 31 + n_audit

    items = [(2 / 3, labels[v] == "A", 40 / 31) for v in review_labelled]
    items += [(1.0, labels[v] == "A", 200 / n_audit) for v in audit_ids]
    truth = weighted(items)
    for name in ("accuracy", "brier", "ece", "th_score"):
        got = pop[name]
        assert math.isclose(got["estimate"], truth[name], rel_tol=1e-6, abs_tol=1e-6), (name, got, truth[name])
        assert got["lower"] <= got["estimate"] <= got["upper"], (name, got)
        print(f"{name}: population {got['estimate']:.4f} [{got['lower']:.4f}, {got['upper']:.4f}]"
              f" = by hand {truth[name]:.4f}; labelled-sample {entry['all_time'][name]:.4f}")
    audit_correct = sum(labels[v] == "A" for v in audit_ids) / n_audit
    assert math.isclose(pop["auto_accept_precision"]["estimate"], audit_correct, rel_tol=1e-9)
    # the naive labelled-sample accuracy counts the 15 unsolicited errors and over-weights review
    naive = entry["all_time"]["accuracy"]
    assert naive < pop["accuracy"]["estimate"]
    judge = next(k for k in cal["keys"] if k["key"] == "judge:e3:sc")["population"]
    assert judge["labelled"] == pop["labelled"] and judge["represented"] == pop["represented"]
    assert next(k for k in cal["keys"] if k["key"] == "mode:all:sc")["population"] is None


async def test_tune_weights_labels_by_stratum_and_leaves_unsolicited_out(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.5)], review_seed=5)
    async with S.running_app(settings, storage) as (_app, client):
        # no threshold: everything is reviewed; 60 confident right, 30 split half right
        for i in range(90):
            body = {**PAIR, "id": f"t{i}", "votes": UNANIMOUS if i < 60 else SPLIT,
                    "label": "A" if i < 60 or i % 2 else "B"}
            assert (await client.post("/v1/fuse", json=body, headers=H)).status_code == 200
        tuned = await client.post("/v1/thresholds/tune", json={"panel": "ext", "target_precision": 0.9,
                                                               "min_count": 30}, headers=H)
        out = tuned.json()
        assert tuned.status_code == 200, out
        assert out["stored"] is True and out["threshold"] == 1.0, out
        # the labels came with the requests: a census of their own stratum, by route
        assert out["population"] == {"inline@review": 90} and out["n_unsolicited"] == 0
        # now auto-accepted verdicts: half audited; label the unaudited ones too (unsolicited)
        unsolicited = 0
        for i in range(40):
            r = (await client.post("/v1/fuse", json={**PAIR, "id": f"u{i}", "votes": UNANIMOUS},
                                   headers=H)).json()
            assert r["route"] == "auto_accept"
            await client.post("/v1/feedback", json={"verdict_id": r["id"], "label": "A"}, headers=H)
            unsolicited += r["review"]["stratum"] == "none"
        again = (await client.post("/v1/thresholds/tune", json={"panel": "ext", "target_precision": 0.9,
                                                                "min_count": 30}, headers=H)).json()
    assert again["n_unsolicited"] == unsolicited > 0
    assert again["n_labels"] == 90 + 40 - unsolicited
    assert again["population"] == {"inline@review": 90, "auto@0.5": 40}
    assert "weighted by review stratum" in again["data"]


async def test_dashboard_shows_population_estimates_first_with_their_label_counts(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.5)], review_seed=2)
    await put_threshold(storage)
    async with S.running_app(settings, storage) as (_app, client):
        for i in range(10):
            await client.post("/v1/fuse", json={**PAIR, "id": f"d{i}", "votes": SPLIT, "label": "A"}, headers=H)
        html = (await client.get("/console/calibration", headers=H)).text
    assert html.index("all traffic (population estimates") < html.index("labelled sample")
    row = html[html.index('<tr data-key="method:majority:fused">'):]
    row = row[:row.index("</tr>")]
    assert '<td class="labels">10</td>' in row
    strata = html[html.index('<table class="strata-share">'):]
    strata = strata[strata.index('<tr data-key="method:majority:fused">'):]
    assert "review: 10 / 1.000" in strata[:strata.index("</tr>")]


async def test_inline_labels_are_a_census_stratum_in_the_estimates(storage, tmp_path):
    """A request that carries its label is stamped ``inline`` (inclusion probability 1, never
    queued), whatever its route; such labels feed the population estimates (auto-accepted ones
    the auto-accept precision too) instead of being thrown away as unsolicited."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.0)], review_seed=1)
    await put_threshold(storage)
    async with S.running_app(settings, storage) as (_app, client):
        outs = []
        for i in range(20):
            body = {**PAIR, "id": f"in{i}", "votes": UNANIMOUS if i % 2 else SPLIT,
                    "label": "A" if i % 4 else "B"}
            outs.append((await client.post("/v1/fuse", json=body, headers=H)).json())
        assert {o["review"]["stratum"] for o in outs} == {"inline"}
        assert all(o["review"]["inclusion_probability"] == 1.0 and not o["review"]["queued"] for o in outs)
        assert {o["route"] for o in outs} == {"auto_accept", "human_review"}
        assert (await client.get("/v1/review/next", params={"panel": "ext", "n": 5}, headers=H)).json()["items"] == []
        cal = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
    entry = next(k for k in cal["keys"] if k["key"] == "method:majority:fused")
    pop = entry["population"]
    auto = [o for o in outs if o["route"] == "auto_accept"]
    assert pop["labelled"] == {"inline@auto": len(auto), "inline@review": 20 - len(auto)}
    assert pop["unsolicited"]["labelled"] == 0
    right = [o["choice"] == ("A" if int(o["id"][2:]) % 4 else "B") for o in outs]
    assert pop["accuracy"]["estimate"] == pytest.approx(sum(right) / 20)
    auto_right = [r for r, o in zip(right, outs, strict=True) if o["route"] == "auto_accept"]
    assert pop["auto_accept_precision"]["estimate"] == pytest.approx(sum(auto_right) / len(auto_right))
