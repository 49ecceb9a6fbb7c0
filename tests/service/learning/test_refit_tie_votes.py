"""A refit learns from tie votes as answers, not as failures (docs/design.md, 'Fusion'): the
learned method's features give a tie its own indicator, so a judge whose "tie" means
something is learned, and a stored model tells a tie from a failed vote."""

from __future__ import annotations

import numpy as np

from judgefuse.fusion import StackedFusion
from judgefuse.fusion.auto import AutoFusion
from judgefuse.fusion.capabilities import REFIT_METHOD, restore_method
from judgefuse.judges.types import JudgeVote
from judgefuse.service.learning.refit_evaluation import evaluate_bounded


def _panel(n: int, seed: int) -> tuple[list[list[JudgeVote]], list[str]]:
    """j1 right 75% of the time; j2 says "tie" on 60% of the B items and 10% of the A items,
    fails (a timeout) on 20% of the rest, otherwise flips a coin."""
    rng = np.random.default_rng(seed)
    batches, labels = [], []
    for _ in range(n):
        truth = "A" if rng.random() < 0.5 else "B"
        other = "B" if truth == "A" else "A"
        j1 = JudgeVote(judge="j1", mode="sc", choice=truth if rng.random() < 0.75 else other, confidence=0.75)
        if rng.random() < (0.6 if truth == "B" else 0.1):
            j2 = JudgeVote.tied("j2", "sc")
        elif rng.random() < 0.2:
            j2 = JudgeVote.invalid("j2", "sc", "timeout")
        else:
            j2 = JudgeVote(judge="j2", mode="sc", choice=str(rng.choice(["A", "B"])), confidence=0.6)
        batches.append([j1, j2])
        labels.append(truth)
    return batches, labels


def test_a_refit_learns_what_a_judges_tie_means_and_tells_it_from_a_failure():
    batches, labels = _panel(300, seed=0)
    evaluation, capped = evaluate_bounded(batches, labels, "majority", 5, None, "brier", None,
                                          REFIT_METHOD, None)
    assert capped is None and evaluation.params is not None, evaluation.why_not
    model = restore_method(REFIT_METHOD, evaluation.params)
    # the default refit (auto) chose a stacking candidate here: its features, read through auto
    assert isinstance(model, AutoFusion) and isinstance(model.chosen_base, StackedFusion), evaluation.described
    names = model.chosen_base.feature_names
    assert names[:10] == ["j1:logodds", "j1:missing", "j1:invalid", "j1:tie", "j1:direction",
                          "j2:logodds", "j2:missing", "j2:invalid", "j2:tie", "j2:direction"]
    coef = model.chosen_base.coefficients
    assert coef["j2:tie"] < -0.5  # j2's tie is evidence for B
    j1 = JudgeVote(judge="j1", mode="sc", choice="A", confidence=0.75)
    tie, failed = model.predict_p_a([[j1, JudgeVote.tied("j2", "sc")], [j1, JudgeVote.invalid("j2", "sc", "timeout")]])
    assert failed - tie > 0.15
