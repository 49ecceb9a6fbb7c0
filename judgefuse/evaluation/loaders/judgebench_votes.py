"""One JudgeBench output record -> one :class:`JudgeVote`: JudgeBench's choice rule and p_a by judge kind.

Split from :mod:`.judgebench` (which reads the files, names the judges and pairs records with
items) because these are the rules a reader of the numbers has to check, and they are about one
record at a time. Every fault in a record is a :class:`DatasetError` naming file, line and field.

Choice (JudgeBench's own rule)
------------------------------
Each game's decision, in the original order, counts +1 for A (``A>B``), -1 for B (``B>A``), 0 for a
tie (``A=B``) or no decision (null). Sum > 0 -> A, < 0 -> B. A sum of 0 from ties only (or a tie
and a null) is a **tie vote** (``JudgeVote.tie``: what the judge said, kept as said; ``p_a`` 0.5,
the rule's own p_a kept as signal ``tie_p_a`` when it differs); any other 0 is an invalid vote
with error ``games disagree`` (one game each way) or ``no decision`` (both null). JudgeBench scores a pair +1 per game agreeing with the label, -1 per game
contradicting it and counts it correct when the sum is > 0; as the label is A or B this is exactly
"choice == label", so the accuracy of the votes equals :func:`judgebench_score` on the raw records.
A decision the format does not define (``"A>A"``, seen in published files) counts 0 as in
JudgeBench's scorer (it matches neither order of the label): it is noted on the vote, recorded in
the loader's :class:`~.answers.UndefinedAnswers`, and is the vote's error when the vote is invalid.

p_a (probability that the original A is better), by judge kind
--------------------------------------------------------------
* ``reward`` (``judge_name=reward_model``; ``scores = [score of shown A, score of shown B]``):
  Bradley-Terry, the model reward models are trained with. Per game the margin of the original A
  over the original B is ``s[0] - s[1]`` in g1 and ``s[1] - s[0]`` in g2 (swapped). ``p_a =
  sigmoid(mean of the two margins)``; signals ``margin`` (that mean), ``margin_g1``, ``margin_g2``.
* ``verdict`` (``judge_name=arena_hard``): the strength the decision drops is read from the critique
  text, the LAST ``[[X op Y]]`` verdict in ``response``: ``>>`` strong -> 0.9 for the winner,
  ``>`` weak -> 0.7, ``=`` tie -> 0.5 (``<``/``<<`` read the other way). This is a per-game
  probability that the shown A wins, turned to the original order (g2: ``1 - p``); ``p_a`` is the
  mean over the games. The levels are Arena-Hard's own five-point scale placed symmetrically and
  kept away from 0/1 (one judge's word is never certainty). A game whose text has no verdict uses
  its decision at the weak level (0.7 / 0.3 / 0.5), noted; a null decision without text is not a game.
* ``rubric`` (``judge_name=rubric`` / ``no_rubric``; ``score_A``, ``score_B`` per game on a 0-1 scale,
  -1 meaning the grader failed and the decision then rests on the sentinel): a soft version of the
  decision rule below. Per game ``d = score(original A) - score(original B)`` in [-1, 1] and the game
  counts ``w = (1 + d) / 2`` of a win for A; a game with a -1 sentinel counts its decision as a hard
  win (1 / 0, tie 0.5). ``p_a = (sum w + 1) / (games + 2)``, so two perfect games give 0.75, the
  same ceiling as the decision rule: these absolute graders are the weakest judges here (43-45%).
  Signal ``margin`` = mean ``d`` over games with both scores.
* ``decision`` (anything else, or a vote whose kind-specific data is missing): Laplace's rule of
  succession, ``p_a = (games for A + 0.5 * ties + 1) / (games + 2)`` over games with a decision
  (null decisions are not games); agreement of both games gives 0.75, never certainty.

An invalid vote keeps its ``p_a`` (e.g. two games that disagree but whose margins do not cancel);
a valid vote's confidence is ``p_a`` for A and ``1 - p_a`` for B. ``samples`` holds the two games'
letters in the original order (None for a tie or no decision); signal ``sign_sum`` is the sum above.
``explanation`` is what a fuser reads: g1's critique (arena_hard) or g1's two rubric gradings;
reward models have none. ``raw`` keeps both recorded decisions as JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from judgefuse.evaluation.loaders.answers import UndefinedAnswers
from judgefuse.evaluation.loaders.errors import DatasetError, from_validation
from judgefuse.evaluation.loaders.jsonl import as_float, member, require
from judgefuse.json_input import JSONTextError, parse_json
from judgefuse.judges.types import JudgeVote, Letter

Kind = Literal["reward", "verdict", "rubric", "decision"]

DECISIONS = ("A>B", "B>A", "A=B")
_FLIP = {"A>B": "B>A", "B>A": "A>B", "A=B": "A=B", None: None}
_SIGN = {"A>B": 1, "B>A": -1, "A=B": 0, None: 0}
_LABELS: dict[str, Letter] = {"A>B": "A", "B>A": "B"}

VERDICT_RE = re.compile(r"\[\[\s*([AB])\s*(>>|>|=|<<|<)\s*([AB])\s*\]\]")
STRONG, WEAK, TIE = 0.9, 0.7, 0.5
RUBRIC_FAILED = -1.0


# ---------------------------------------------------------------- JudgeBench's own rule


def _decision(
    game: Any,
    path: Path | None,
    line: int | None,
    index: int,
    answers: UndefinedAnswers | None = None,
    judge: str = "",
) -> str | None:
    """The game's decision; an undefined one (``"A>A"``) reads as no decision and is recorded.

    Without a collector an undefined decision is an error (the strict reading).
    """
    if not isinstance(game, Mapping):
        raise DatasetError(path, "must be an object", line=line, field=f"judgments[{index}]")
    value = game.get("decision")
    if value is not None and not member(value, DECISIONS):
        field = f"judgments[{index}].decision"
        expected = f"one of {', '.join(DECISIONS)} or null"
        if answers is None:
            raise DatasetError(path, f"unknown decision {value!r} (expected {expected})", line=line, field=field)
        answers.add(path, line, field, judge, value, expected=expected)
        return None
    return value


def _games(record: Mapping[str, Any], path: Path | None, line: int | None) -> list[Mapping[str, Any]]:
    games = record.get("judgments")
    if games is None and "judgments" not in record:
        raise DatasetError(path, "required key is missing", line=line, field="judgments")
    if not isinstance(games, list) or len(games) != 2:
        raise DatasetError(
            path, "must be a list of two games (original order, swapped order)", line=line, field="judgments"
        )
    return games


def record_label(record: Mapping[str, Any], path: Path | None, line: int | None) -> Letter:
    """The pair's ``label`` as the better letter (``"A>B"`` -> ``"A"``)."""
    value = require(record, "label", path, line)
    if not member(value, _LABELS):
        raise DatasetError(path, f"unknown label {value!r} (expected 'A>B' or 'B>A')", line=line, field="label")
    return _LABELS[value]


def original_order_decisions(
    record: Mapping[str, Any],
    path: Path | None = None,
    line: int | None = None,
    answers: UndefinedAnswers | None = None,
    judge: str = "",
) -> tuple[str | None, str | None]:
    """The two games' decisions in the original order (g2's flipped).

    An undefined decision reads as None (JudgeBench's scorer: it matches neither order of the
    label, so the game scores 0) and is recorded in ``answers``; without ``answers`` it is an error.
    """
    games = _games(record, path, line)
    return (
        _decision(games[0], path, line, 0, answers, judge),
        _FLIP[_decision(games[1], path, line, 1, answers, judge)],
    )


def judgebench_pair_score(
    record: Mapping[str, Any], path: Path | None = None, line: int | None = None, *, strict: bool = True
) -> int:
    """JudgeBench's score of one pair: +1 per game agreeing with the label, -1 per game against it.

    Ties and null decisions count 0; g2 (swapped order) is flipped first. Range -2..2. An undefined
    decision (``"A>A"``) is an error when ``strict``, else it counts 0 as in JudgeBench's scorer.
    """
    label = record_label(record, path, line)
    want, against = ("A>B", "B>A") if label == "A" else ("B>A", "A>B")
    score = 0
    answers = None if strict else UndefinedAnswers()
    for decision in original_order_decisions(record, path, line, answers):
        score += 1 if decision == want else -1 if decision == against else 0
    return score


def judgebench_score(records: Iterable[Mapping[str, Any]], *, strict: bool = True) -> float:
    """JudgeBench accuracy of one judge's raw output records: the share of pairs scoring > 0."""
    scores = [judgebench_pair_score(record, strict=strict) for record in records]
    if not scores:
        raise ValueError("judgebench_score needs at least one record")
    return sum(score > 0 for score in scores) / len(scores)


# ---------------------------------------------------------------- p_a rules


def judgment_of(game: Mapping[str, Any]) -> Mapping[str, Any]:
    """The game's ``judgment`` object (kind-specific data), or ``{}`` when it has none."""
    judgment = game.get("judgment")
    return judgment if isinstance(judgment, Mapping) else {}


def sigmoid(x: float) -> float:
    """The logistic function, without overflow."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def laplace_p_a(decisions: Sequence[str | None]) -> float | None:
    """``(games for A + 0.5 * ties + 1) / (games + 2)`` over games with a decision (original order)."""
    wins = [1.0 if d == "A>B" else 0.0 if d == "B>A" else 0.5 for d in decisions if d is not None]
    if not wins:
        return None
    return (sum(wins) + 1.0) / (len(wins) + 2.0)


def verdict_p_shown_a(text: str) -> float | None:
    """Probability the shown A wins from the LAST ``[[A>>B]]``-style verdict in ``text`` (None if none)."""
    matches = VERDICT_RE.findall(text)
    if not matches:
        return None
    left, op, right = matches[-1]
    if op == "=":
        return TIE
    if left == right:
        return None
    winner = left if op.startswith(">") else right
    p = STRONG if len(op) == 2 else WEAK
    return p if winner == "A" else 1.0 - p


def _scores_pair(value: Any, path: Path, line: int, field: str) -> tuple[float, float]:
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except JSONTextError:
            raise DatasetError(path, f"must be a list of two scores (got {value!r})", line=line, field=field) from None
    if not isinstance(value, list) or len(value) != 2:
        raise DatasetError(path, f"must be a list of two scores (got {value!r})", line=line, field=field)
    return as_float(value[0], path, line, field), as_float(value[1], path, line, field)


def _reward(games, decisions, path, line, notes, signals) -> float | None:
    margins = []
    for index, game in enumerate(games):
        judgment = judgment_of(game)
        if judgment.get("scores") is None:
            notes.append(f"game {index + 1} has no reward scores: decision rule used")
            return laplace_p_a(decisions)
        shown_a, shown_b = _scores_pair(judgment["scores"], path, line, f"judgments[{index}].judgment.scores")
        margins.append(shown_a - shown_b if index == 0 else shown_b - shown_a)
    margin = sum(margins) / len(margins)
    signals.update(margin=margin, margin_g1=margins[0], margin_g2=margins[1])
    return sigmoid(margin)


def _verdict(games, decisions, notes) -> float | None:
    probs = []
    for index, (game, decision) in enumerate(zip(games, decisions, strict=True)):
        text = judgment_of(game).get("response")
        p_shown = verdict_p_shown_a(text) if isinstance(text, str) else None
        if p_shown is None:
            if decision is None:
                continue
            notes.append(f"game {index + 1}: no [[..]] verdict in the text: decision used at weak strength")
            p = WEAK if decision == "A>B" else 1.0 - WEAK if decision == "B>A" else TIE
        else:
            p = p_shown if index == 0 else 1.0 - p_shown
        probs.append(p)
    return sum(probs) / len(probs) if probs else None


def _rubric(games, decisions, path, line, notes, signals) -> float | None:
    wins, margins = [], []
    for index, (game, decision) in enumerate(zip(games, decisions, strict=True)):
        judgment = judgment_of(game)
        if judgment.get("score_A") is None or judgment.get("score_B") is None:
            notes.append(f"game {index + 1} has no rubric scores: its decision counted")
            scores = None
        else:
            scores = [
                as_float(judgment[key], path, line, f"judgments[{index}].judgment.{key}") for key in ("score_A", "score_B")
            ]
            for key, score in zip(("score_A", "score_B"), scores, strict=True):
                if score != RUBRIC_FAILED and not 0.0 <= score <= 1.0:
                    raise DatasetError(
                        path,
                        f"rubric score must be in [0, 1] or -1 for a failed grading (got {score:g})",
                        line=line,
                        field=f"judgments[{index}].judgment.{key}",
                    )
            if RUBRIC_FAILED in scores:
                scores = None
        if scores is None:
            if decision is not None:
                wins.append(1.0 if decision == "A>B" else 0.0 if decision == "B>A" else 0.5)
            continue
        d = scores[0] - scores[1] if index == 0 else scores[1] - scores[0]
        margins.append(d)
        wins.append((1.0 + d) / 2.0)
    if margins:
        signals["margin"] = sum(margins) / len(margins)
    if not wins:
        return None
    return (sum(wins) + 1.0) / (len(wins) + 2.0)


def _explanation(kind: Kind, games: Sequence[Mapping[str, Any]]) -> str:
    judgment = judgment_of(games[0])
    if kind == "rubric":
        parts = [f"[{key[-1]}] {judgment[key]}" for key in ("raw_judge_A", "raw_judge_B") if judgment.get(key)]
        return "\n".join(parts)
    response = judgment.get("response")
    return response if isinstance(response, str) else ""


def vote_from_record(
    record: Mapping[str, Any],
    judge: str,
    kind: Kind,
    path: Path | None = None,
    line: int | None = None,
    answers: UndefinedAnswers | None = None,
) -> JudgeVote:
    """One judge's vote on one pair from its raw output record (rules in the module docstring).

    With ``answers``, an undefined decision reads as no decision (noted on the vote, and its reason
    is the vote's error when the vote ends up invalid); without, it is a DatasetError.
    """
    path = path or Path("<record>")
    games = _games(record, path, line)
    before = len(answers.found) if answers is not None else 0
    decisions = original_order_decisions(record, path, line, answers, judge)
    undefined = [answer.reason for answer in answers.found[before:]] if answers is not None else []
    notes: list[str] = list(undefined)
    signals: dict[str, float] = {}
    if kind == "reward":
        p_a = _reward(games, decisions, path, line, notes, signals)
    elif kind == "verdict":
        p_a = _verdict(games, decisions, notes)
    elif kind == "rubric":
        p_a = _rubric(games, decisions, path, line, notes, signals)
    else:
        p_a = laplace_p_a(decisions)
    signs = [_SIGN[d] for d in decisions]
    total = sum(signs)
    signals["sign_sum"] = float(total)
    samples: list[Letter | None] = ["A" if s > 0 else "B" if s < 0 else None for s in signs]
    common: dict[str, Any] = dict(
        explanation=_explanation(kind, games),
        samples=samples,
        signals=signals,
        raw=json.dumps({"decisions": [g.get("decision") for g in games]}),
        calls=2,
        notes=notes,
    )
    try:
        if total != 0:
            choice: Letter = "A" if total > 0 else "B"
            if p_a is None:  # cannot happen with a decided game; kept as a guard
                p_a = laplace_p_a(decisions) or 0.5
            confidence = p_a if choice == "A" else 1.0 - p_a
            return JudgeVote(judge=judge, mode="recorded", choice=choice, confidence=confidence, p_a=p_a, **common)
        if undefined:
            error = "; ".join(undefined)
        elif 1 in signs and -1 in signs:
            error = "games disagree"
        elif all(d is None for d in decisions):
            error = "no decision"
        else:
            if p_a is not None and p_a != 0.5:
                signals["tie_p_a"] = p_a
            return JudgeVote.tied(judge, "recorded", **common)
        return JudgeVote.invalid(judge, "recorded", error, p_a=p_a, **common)
    except ValidationError as exc:
        raise from_validation(exc, path, line) from exc
