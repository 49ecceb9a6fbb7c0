"""The candidate-aligned view of ``judgefuse compare``, the common pool, and self-preference.

From "When Calibration Rankings Reverse: Accuracy-Controlled Evaluation for Fair Comparison of
LLMs", section 4.3. Every judge scores the same candidate pool; calibration is measured per
*candidate*, not per chosen answer. In a pairwise item both candidates are in the pool, so a
judge's vote gives a confidence to each of them: ``p_a`` to answer A and ``1 - p_a`` to answer B.
Each candidate's outcome is whether the label picks it. CA-ECE bins all 2n candidate
confidences. CA-Brier is their mean squared error, which on a pair equals the Brier score of
``p_a`` against the label. A judge that gave no usable answer on an item scores ``p_a = 0.5``
there, the no-answer rule of every report row (:mod:`judgefuse.evaluation.scoring`).

* :func:`candidate_differences` compares two judges on the items both voted on: the same paired
  bootstrap as the raw, instance- and distribution-aligned views, with pairs resampled whole.
* :func:`common_pool` takes the labelled items that *every* judge voted on. On that one pool it
  reports each judge's accuracy, CA-ECE, CA-Brier and how often it agrees with the other judges.
* :func:`self_preference` needs the item metadata to name the model of each answer
  (``model_a``/``model_b``). It looks at the items where exactly one answer comes from the
  judge's own model family and asks whether the judge picks that answer more often than the
  labels do. A judge's family is read from its name (:func:`model_family`), since a vote names
  its judge, not its model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from judgefuse.calibration.binning import bin_totals, equal_width_bin_index
from judgefuse.calibration.bootstrap import LARGE_CELLS, interval_from_stats
from judgefuse.calibration.comparison import ViewDifference
from judgefuse.calibration.paired_cells import candidate_cell_stats, mean_difference_cell_stats
from judgefuse.calibration.scores import brier_arrays, ece_arrays
from judgefuse.evaluation.scoring import NO_ANSWER_CONFIDENCE, judge_names
from judgefuse.judges.types import JudgedItem, JudgeVote

__all__ = [
    "CA_VIEW",
    "CandidateScores",
    "PoolRow",
    "SelfPreference",
    "candidate_differences",
    "candidate_scores",
    "common_pool",
    "model_family",
    "preference_row",
    "self_preference",
]

CA_VIEW = "candidate_aligned"
ANSWER_MODEL_KEYS = (("model_a", "model_b"), ("response_model_a", "response_model_b"))
"""Item metadata keys naming the model that wrote answer A and answer B."""

_FAMILIES: tuple[tuple[str, str], ...] = (
    ("openai", r"gpt|chatgpt|davinci|o[134](?:-|$)"),
    ("anthropic", r"claude"),
    ("google", r"gemini|gemma|palm|bard"),
    ("meta", r"llama"),
    ("qwen", r"qwen|qwq"),
    ("mistral", r"mistral|mixtral|ministral|codestral"),
    ("deepseek", r"deepseek"),
    ("internlm", r"internlm"),
    ("falcon", r"falcon"),
    ("microsoft", r"phi-"),
    ("cohere", r"command-r|cohere"),
    ("huggingface", r"smollm|zephyr"),
)
_FAMILY_RE = [(family, re.compile(rf"(?<![a-z0-9])(?:{pattern})")) for family, pattern in _FAMILIES]


def model_family(name: str) -> str | None:
    """The model family a model or judge name names (the earliest match in the name), else None.

    ``openai/gpt-4o`` and ``arena_hard:o1-mini`` give ``openai``;
    ``reward_model:Skywork-Reward-Llama-3.1-8B`` gives ``meta`` (the base model, not the
    fine-tuner). Names match case-insensitively, and only at the start of a word.
    """
    text = name.lower()
    found = [(match.start(), family) for family, pattern in _FAMILY_RE if (match := pattern.search(text))]
    return min(found)[1] if found else None


# ---------------------------------------------------------------- per-judge candidate scores


def _vote_of(votes: Sequence[JudgeVote], name: str) -> JudgeVote | None:
    return next((vote for vote in votes if vote.judge == name), None)


def _p_a(vote: JudgeVote) -> float:
    """The confidence the vote gives to answer A (the no-answer rule: 0.5)."""
    if vote.valid and vote.p_a is not None and math.isfinite(vote.p_a):
        return float(vote.p_a)
    return NO_ANSWER_CONFIDENCE


def _decided_label(judged: JudgedItem) -> bool:
    return judged.item.label in ("A", "B")


@dataclass(frozen=True)
class CandidateScores:
    """One judge's candidate-level inputs on some items: ``p_a`` and whether A is the label."""

    p_a: np.ndarray
    label_a: np.ndarray
    item_index: np.ndarray

    def candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """(confidence, correct) for each of the 2n candidates: A's, then B's."""
        return np.concatenate([self.p_a, 1.0 - self.p_a]), np.concatenate([self.label_a, ~self.label_a]).astype(float)

    def ece(self, n_bins: int) -> float:
        return float(ece_arrays(*self.candidates(), n_bins))

    def brier(self) -> float:
        return float(brier_arrays(*self.candidates()))


def candidate_scores(name: str, items: Sequence[JudgedItem], *, only: np.ndarray | None = None) -> CandidateScores:
    """``name``'s ``p_a`` on the items it voted on that have an A/B label (``only``: those positions)."""
    wanted = None if only is None else {int(i) for i in only}
    p_a: list[float] = []
    label_a: list[bool] = []
    index: list[int] = []
    for position, judged in enumerate(items):
        if (wanted is not None and position not in wanted) or not _decided_label(judged):
            continue
        vote = _vote_of(judged.votes, name)
        if vote is None:
            continue
        p_a.append(_p_a(vote))
        label_a.append(judged.item.label == "A")
        index.append(position)
    return CandidateScores(np.asarray(p_a, dtype=float), np.asarray(label_a, dtype=bool), np.asarray(index, dtype=int))


def _metric(scores_p_a: np.ndarray, label_a: np.ndarray, metric: str, n_bins: int) -> float:
    scores = CandidateScores(scores_p_a, label_a, np.arange(label_a.size))
    return scores.ece(n_bins) if metric == "ece" else scores.brier()


def _candidate_item_stats(
    first: CandidateScores, second: CandidateScores, *, n_bins: int, n_resamples: int, seed: int
) -> dict[str, np.ndarray]:
    """:func:`candidate_differences`'s bootstrap differences per metric, items resampled one by one."""
    label_a = first.label_a
    n = label_a.size
    # per-candidate arrays once (A's then B's, as CandidateScores.candidates); a resample of items
    # takes both candidates of each drawn item, so its scores are these arrays gathered at
    # (idx, idx + n): the same floats as rebuilding the candidates, without the edge search
    z = np.concatenate([label_a, ~label_a]).astype(float)
    per_judge = []
    for scores in (first, second):
        c = np.concatenate([scores.p_a, 1.0 - scores.p_a])
        per_judge.append((c, equal_width_bin_index(c, n_bins), (c - z) ** 2))
    rng = np.random.default_rng(seed)
    stats = {metric: np.empty(n_resamples) for metric in ("ece", "brier")}
    for b in range(n_resamples):  # one draw per resample, as before; each one used by both metrics
        idx = rng.integers(0, n, size=n)
        both = np.concatenate([idx, idx + n])
        zb = z[both]
        (c1, bin1, sq1), (c2, bin2, sq2) = per_judge
        stats["ece"][b] = (
            bin_totals(c1[both], zb, bin1[both], n_bins).calibration_error()
            - bin_totals(c2[both], zb, bin2[both], n_bins).calibration_error()
        )
        stats["brier"][b] = float(sq1[both].mean()) - float(sq2[both].mean())
    return stats


def candidate_differences(
    first: CandidateScores,
    second: CandidateScores,
    *,
    raw_winners: dict[str, int | None],
    n_bins: int = 10,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[tuple[str, str], ViewDifference]:
    """CA-ECE and CA-Brier of two judges on the same items (aligned), with paired bootstrap
    intervals of ``first - second`` (items resampled with both their candidates), and whether
    the order flips ``raw_winners[metric]`` (1 or 2, None: no raw order). Past
    :data:`~judgefuse.calibration.bootstrap.LARGE_CELLS` resamples x items the resamples are drawn
    over cells (:func:`~judgefuse.calibration.paired_cells.candidate_cell_stats`: the item-level
    intervals up to Monte Carlo error, as ``eval``'s large rows) unless the cells in use are too many."""
    if not np.array_equal(first.item_index, second.item_index):
        raise ValueError("both judges must be scored on the same items, in the same order")
    label_a = first.label_a
    n = label_a.size
    stats = None
    if n * n_resamples > LARGE_CELLS:  # resamples drawn over cells, as eval's large rows are
        stats = candidate_cell_stats(first.p_a, second.p_a, label_a, n_bins=n_bins, n_resamples=n_resamples, seed=seed)
    if stats is None:  # small, or too many cells in use (MAX_CELL_DRAWS): items resampled
        stats = _candidate_item_stats(first, second, n_bins=n_bins, n_resamples=n_resamples, seed=seed)
    differences: dict[tuple[str, str], ViewDifference] = {}
    for metric in ("ece", "brier"):
        s1 = _metric(first.p_a, label_a, metric, n_bins)
        s2 = _metric(second.p_a, label_a, metric, n_bins)
        interval = interval_from_stats(s1 - s2, stats[metric], level=level, bounds=(-1.0, 1.0), n_resamples=n_resamples)
        winner = None if s1 == s2 or math.isnan(s1) or math.isnan(s2) else (1 if s1 < s2 else 2)
        raw = raw_winners.get(metric)
        flips = raw is not None and winner is not None and winner != raw
        differences[(metric, CA_VIEW)] = ViewDifference(metric, CA_VIEW, s1, s2, interval, flips)
    return differences


# ---------------------------------------------------------------- the common pool


@dataclass(frozen=True)
class PoolRow:
    """One judge on the common pool: how often it is right and agrees with the others, and
    its candidate-level calibration."""

    judge: str
    n: int
    accuracy: float
    agreement: float
    """Mean over the other judges of the share of pool items where both chose the same answer
    (an item without a usable answer from either never agrees). NaN with one judge."""
    ca_ece: float
    ca_brier: float


def _choice(vote: JudgeVote | None) -> str | None:
    return vote.choice if vote is not None and vote.valid and vote.choice in ("A", "B") else None


def common_pool(items: Sequence[JudgedItem], *, n_bins: int = 10) -> tuple[list[PoolRow], int]:
    """(a row per judge, pool size) on the A/B-labelled items every judge voted on."""
    names = judge_names(items)
    pool = [
        judged
        for judged in items
        if _decided_label(judged) and all(_vote_of(judged.votes, name) is not None for name in names)
    ]
    choices = {name: [_choice(_vote_of(j.votes, name)) for j in pool] for name in names}
    rows = []
    for name in names:
        scores = candidate_scores(name, pool)
        mine = choices[name]
        right = [choice == judged.item.label for choice, judged in zip(mine, pool, strict=True)]
        others = [
            float(np.mean([a is not None and a == b for a, b in zip(mine, choices[other], strict=True)]))
            for other in names
            if other != name
        ]
        rows.append(
            PoolRow(
                judge=name,
                n=len(pool),
                accuracy=float(np.mean(right)) if pool else math.nan,
                agreement=float(np.mean(others)) if others and pool else math.nan,
                ca_ece=scores.ece(n_bins) if pool else math.nan,
                ca_brier=scores.brier() if pool else math.nan,
            )
        )
    return rows, len(pool)


# ---------------------------------------------------------------- self-preference


def answer_families(judged: JudgedItem) -> tuple[str | None, str | None]:
    """The model families of answer A and answer B, from the item metadata (None: not named)."""
    metadata = judged.item.metadata or {}
    for key_a, key_b in ANSWER_MODEL_KEYS:
        model_a, model_b = metadata.get(key_a), metadata.get(key_b)
        if isinstance(model_a, str) and isinstance(model_b, str):
            return model_family(model_a), model_family(model_b)
    return None, None


@dataclass(frozen=True)
class SelfPreference:
    """A judge on the items where exactly one answer comes from its own model family.

    ``chose_own`` and ``label_own`` are shares of the ``n_decided`` items where the judge gave a
    usable answer: the judge picked its family's answer, and the label did. ``excess`` is their
    difference, with a 95% bootstrap interval (``low``, ``high``). A positive excess whose
    interval excludes 0 is self-preference. ``own_when_other_better`` counts the judge picking
    its own answer where the label picks the other; ``other_when_own_better`` counts the reverse
    error. ``n_no_answer`` is the items with no usable answer, left out of the shares.
    """

    judge: str
    family: str
    n: int
    n_decided: int
    n_no_answer: int
    chose_own: float
    label_own: float
    excess: float
    low: float
    high: float
    own_when_other_better: int
    other_when_own_better: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0


RESAMPLE_CELLS = 1 << 22
"""Most cells of the resamples x items index matrix :func:`self_preference` holds at once (32 MB)."""


def _excess_stats(chose_own: np.ndarray, label_own: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Bootstrap means of ``chose_own - label_own`` over ``n_resamples`` resamples of the items.

    The draw is ``rng.integers(0, n, size=(n_resamples, n))`` taken a block of rows at a time
    (at most :data:`RESAMPLE_CELLS` cells): the generator yields the same integers in the same
    order whatever the blocks (a test checks it), so every resample and every mean is the full
    matrix's, in bounded memory (the full matrix is 8 GB at 10^6 items). Past
    :data:`~judgefuse.calibration.bootstrap.LARGE_CELLS` resamples x items the resamples are drawn
    over the four (chose own, label own) cells instead
    (:func:`~judgefuse.calibration.paired_cells.mean_difference_cell_stats`): the same law, a
    different stream of draws.
    """
    n = chose_own.size
    if n * n_resamples > LARGE_CELLS:  # the four (chose own, label own) cells: the same law, drawn per cell
        return mean_difference_cell_stats(chose_own, label_own, n_resamples=n_resamples, seed=seed)
    rng = np.random.default_rng(seed)
    rows = max(1, RESAMPLE_CELLS // max(n, 1))
    stats = np.empty(n_resamples)
    for start in range(0, n_resamples, rows):
        stop = min(start + rows, n_resamples)
        draws = rng.integers(0, n, size=(stop - start, n))
        stats[start:stop] = chose_own[draws].mean(axis=1) - label_own[draws].mean(axis=1)
    return stats


def self_preference(
    items: Sequence[JudgedItem], *, n_resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> list[SelfPreference]:
    """One :class:`SelfPreference` per judge whose family is known and owns exactly one answer
    of at least one labelled item (the module docstring)."""
    found = []
    families = [answer_families(judged) for judged in items]
    for name in judge_names(items):
        family = model_family(name)
        if family is None:
            continue
        own_is_a: list[bool] = []
        chose_a: list[str | None] = []
        label_a: list[bool] = []
        for judged, (fam_a, fam_b) in zip(items, families, strict=True):
            if not _decided_label(judged) or fam_a is None or fam_b is None or (fam_a == family) == (fam_b == family):
                continue
            vote = _vote_of(judged.votes, name)
            if vote is None:
                continue
            own_is_a.append(fam_a == family)
            chose_a.append(_choice(vote))
            label_a.append(judged.item.label == "A")
        if own_is_a:
            found.append(
                preference_row(
                    name,
                    family,
                    np.asarray(own_is_a, dtype=bool),
                    np.asarray([choice is not None for choice in chose_a], dtype=bool),
                    np.asarray([choice == "A" for choice in chose_a], dtype=bool),
                    np.asarray(label_a, dtype=bool),
                    n_resamples=n_resamples,
                    level=level,
                    seed=seed,
                )
            )
    return found


def preference_row(
    name: str,
    family: str,
    own_is_a: np.ndarray,
    answered: np.ndarray,
    chose_a: np.ndarray,
    label_a: np.ndarray,
    *,
    n_resamples: int,
    level: float,
    seed: int,
) -> SelfPreference:
    """A judge's :class:`SelfPreference` from its items (each (n,), bool): whether its family wrote
    answer A, whether it gave a usable answer, whether that answer was A, whether the label is A."""
    chose_own = (chose_a == own_is_a)[answered].astype(float)
    label_own = (label_a == own_is_a)[answered].astype(float)
    decided = chose_own.size
    excess = float(chose_own.mean() - label_own.mean()) if decided else math.nan
    low = high = math.nan
    if decided:
        stats = _excess_stats(chose_own, label_own, n_resamples, seed)
        interval = interval_from_stats(excess, stats, level=level, bounds=(-1.0, 1.0), n_resamples=n_resamples)
        low, high = interval.low, interval.high
    return SelfPreference(
        judge=name,
        family=family,
        n=own_is_a.size,
        n_decided=decided,
        n_no_answer=own_is_a.size - decided,
        chose_own=float(chose_own.mean()) if decided else math.nan,
        label_own=float(label_own.mean()) if decided else math.nan,
        excess=excess,
        low=low,
        high=high,
        own_when_other_better=int(np.sum((chose_own == 1) & (label_own == 0))),
        other_when_own_better=int(np.sum((chose_own == 0) & (label_own == 1))),
    )
