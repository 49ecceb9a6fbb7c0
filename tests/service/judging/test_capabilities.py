"""The service asks a fusion method what it is, never its name.

A learned method registered from outside ``judgefuse/`` (here, in this test) is refitted,
stored, restored and served by the same code that serves the built-in stacked fusion, and
no file under ``judgefuse/service`` or ``judgefuse/evaluation`` compares a method name with the
string ``"stacked"`` or ``"fuser"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from judgefuse.fusion import fusion_method, get_method
from judgefuse.fusion.capabilities import (
    capabilities,
    method_params,
    restore_method,
)
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote
from judgefuse.service.learning.refit import refit
from judgefuse.service.storage import SQLiteStorage, VerdictRecord

REPO = Path(__file__).resolve().parents[3]
PLUGIN = "test_best_judge"


@fusion_method(PLUGIN)
class BestJudge:
    """Follows the judge that was most often right on the labels, at its labelled accuracy."""

    requires_fit = True

    def __init__(self) -> None:
        self.name = PLUGIN
        self.judge: str | None = None
        self.accuracy = 0.5
        self.model_version: str | None = None

    def fit(self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[str]) -> BestJudge:
        right: dict[str, int] = {}
        for votes, label in zip(batches, labels, strict=True):
            for vote in votes:
                right[vote.judge] = right.get(vote.judge, 0) + (vote.choice == label)
        self.judge = max(sorted(right), key=lambda j: right[j])
        self.accuracy = min(0.99, max(0.5, right[self.judge] / len(labels)))
        self.model_version = f"{self.judge}@{self.accuracy:.4f}"
        return self

    def to_params(self) -> dict[str, Any]:
        return {"judge": self.judge, "accuracy": self.accuracy}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> BestJudge:
        model = cls()
        model.judge, model.accuracy = str(params["judge"]), float(params["accuracy"])
        model.model_version = f"{model.judge}@{model.accuracy:.4f}"
        return model

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        vote = next((v for v in votes if v.judge == self.judge and v.choice is not None), None)
        if vote is None:
            return Verdict(choice=None, confidence=0.5, p_a=0.5, method=self.name, votes=list(votes),
                           model_version=self.model_version)
        p_a = self.accuracy if vote.choice == "A" else 1.0 - self.accuracy
        return Verdict(choice=vote.choice, confidence=self.accuracy, p_a=p_a, method=self.name,
                       votes=list(votes), model_version=self.model_version)


def test_builtin_capabilities() -> None:
    stacked, fuser, majority = capabilities("stacked"), capabilities("fuser"), capabilities("majority")
    assert (stacked.requires_fit, stacked.saves_params, stacked.refittable, stacked.voting) == (
        True, True, True, False)
    assert (fuser.reads_item, fuser.requires_fit, fuser.voting) == (True, False, False)
    assert (majority.voting, majority.saves_params, majority.refittable) == (True, False, False)
    recalibrated = capabilities("majority+isotonic")
    # base+recalibrator saves through Recalibrated.to_params (a voting base has nothing to save)
    assert recalibrated.requires_fit and recalibrated.saves_params and not recalibrated.voting
    assert recalibrated.refittable and not recalibrated.cold_start
    ds, ds_platt = capabilities("dawid_skene"), capabilities("dawid_skene+platt")
    assert (ds.fits_unlabelled, ds.cold_start, ds.requires_fit, ds.voting, ds.served_from_model) == (
        True, True, False, False, True)
    assert (ds_platt.requires_fit, ds_platt.refittable, ds_platt.fits_unlabelled) == (True, True, False)
    with pytest.raises(KeyError, match="no-such"):
        capabilities("no-such")


def test_plugin_method_declares_itself_refittable() -> None:
    found = capabilities(PLUGIN)
    assert found.requires_fit and found.saves_params and found.refittable and not found.reads_item


def test_restore_refuses_a_method_without_params() -> None:
    with pytest.raises(TypeError, match="majority"):
        restore_method("majority", {})
    with pytest.raises(TypeError, match="no parameters"):
        method_params(get_method("majority"))


def _record(i: int) -> tuple[VerdictRecord, str]:
    truth = "A" if i % 2 == 0 else "B"
    other = "B" if truth == "A" else "A"
    wrong = i % 5 < 2  # j2 is confidently wrong on 40% of the items
    votes = [
        JudgeVote(judge="j1", mode="sc", choice=truth, confidence=0.6),
        JudgeVote(judge="j2", mode="sc", choice=other if wrong else truth, confidence=0.95),
    ]
    verdict = get_method("majority")(votes).model_copy(update={"id": f"v{i}"})
    return VerdictRecord(id=f"v{i}", tenant="t", panel="p", created_at=1000.0 + i,
                         verdict=verdict), truth


async def test_refit_promotes_and_restores_a_plugin_learned_method(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "s.db")
    await storage.open()
    try:
        for i in range(60):
            record, truth = _record(i)
            await storage.save_verdict("t", record)
            await storage.set_label("t", record.id, truth, lambda _record, _label: {})  # type: ignore[arg-type]
        outcome, fitted = await refit(
            storage, storage, storage, "t", "p", voting_method="majority", min_labels=20, max_labels=1000,
            n_folds=3, promote_on="brier", learned=PLUGIN,
        )
        assert outcome.status == "promoted", outcome.reason
        assert outcome.active_method == PLUGIN
        assert outcome.metrics is not None
        print(f"plugin Brier {outcome.metrics['stacked_brier']:.4f} vs majority "
              f"{outcome.metrics['baseline_brier']:.4f}")
        assert outcome.metrics["stacked_brier"] < outcome.metrics["baseline_brier"]
        stored = await storage.get_model("t", "p")
        assert stored is not None and stored.method == PLUGIN
        restored = restore_method(stored.method, stored.params)
        assert isinstance(restored, BestJudge) and restored.judge == "j1"
        assert fitted is not None and restored.model_version == outcome.model_version
        with pytest.raises(ValueError, match="cannot be refitted"):
            await refit(storage, storage, storage, "t", "p", voting_method="majority",
                        min_labels=20, max_labels=1000, n_folds=3, learned="majority")
    finally:
        await storage.close()


NAME_CHECK = re.compile(r"""["'](stacked|fuser)["']""")


def test_no_method_name_checks_outside_fusion() -> None:
    """The service and evaluation rooms ask capabilities; only ``fusion/`` names its methods."""
    found = []
    for room in ("service", "evaluation"):
        for path in sorted((REPO / "judgefuse" / room).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if NAME_CHECK.search(line):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "method names checked outside fusion/:\n" + "\n".join(found)


def test_refit_method_setting_must_be_refittable() -> None:
    from judgefuse.service.settings import SettingsError, load_settings

    assert load_settings(refit_method="dawid_skene+platt").learning.refit_method == "dawid_skene+platt"
    for bad in ("majority", "dawid_skene", "nope"):
        with pytest.raises(SettingsError, match="refit_method"):
            load_settings(refit_method=bad)
