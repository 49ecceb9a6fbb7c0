"""JudgeBench recorded judgments -> ``list[JudgedItem]``.

Inputs: the pairs file (``dataset=judgebench,response_model=....jsonl``: ``pair_id``, ``source``,
``question``, ``response_A``, ``response_B``, ``label`` "A>B"/"B>A") and any number of output files
(``outputs/dataset=judgebench,...,judge_name=K,[rubric_model=R,]judge_model=M.jsonl``), one judge
each. Every output record is the pair plus ``judgments: [g1, g2]``; g1 judged the original order,
g2 the swapped order, so **g2's decision is flipped** before use. Items keep the pairs file's order
(output files may list pairs in another order; they are matched by ``pair_id``); votes keep the
order of the output files. Category = ``source`` up to the first '-' (mmlu / livebench /
livecodebench).

Judge name (from the file name): ``K:M`` with M's organisation prefix and date suffix removed,
and the rubric model in brackets when there is one: ``arena_hard:o1-mini``,
``reward_model:Skywork-Reward-Gemma-2-27B``, ``rubric(gpt-4.1):Qwen3-1.7B``, ``no_rubric:Qwen3-1.7B``.

Choice (JudgeBench's own rule)
------------------------------
Each game's decision, in the original order, counts +1 for A (``A>B``), -1 for B (``B>A``), 0 for a
tie (``A=B``) or no decision (null). Sum > 0 -> A, < 0 -> B, 0 -> invalid vote with error
``games disagree`` (one game each way), ``tie`` (ties only, or a tie and a null) or ``no decision``
(both null). JudgeBench scores a pair +1 per game agreeing with the label, -1 per game
contradicting it and counts it correct when the sum is > 0; as the label is A or B this is exactly
"choice == label", so the accuracy of the votes equals :func:`judgebench_score` on the raw records.

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

from judgefuse.evaluation.loaders.errors import DatasetError, from_validation
from judgefuse.evaluation.loaders.jsonl import as_float, as_text, first_record, iter_jsonl, member, paused_gc, require
from judgefuse.judges.types import JudgedItem, JudgeVote, Letter, PairwiseItem

Kind = Literal["reward", "verdict", "rubric", "decision"]

DECISIONS = ("A>B", "B>A", "A=B")
_FLIP = {"A>B": "B>A", "B>A": "A>B", "A=B": "A=B", None: None}
_SIGN = {"A>B": 1, "B>A": -1, "A=B": 0, None: 0}
_LABELS: dict[str, Letter] = {"A>B": "A", "B>A": "B"}

VERDICT_RE = re.compile(r"\[\[\s*([AB])\s*(>>|>|=|<<|<)\s*([AB])\s*\]\]")
STRONG, WEAK, TIE = 0.9, 0.7, 0.5
RUBRIC_FAILED = -1.0
_DATE_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


# ---------------------------------------------------------------- JudgeBench's own rule


def _decision(game: Any, path: Path | None, line: int | None, index: int) -> str | None:
    if not isinstance(game, Mapping):
        raise DatasetError(path, "must be an object", line=line, field=f"judgments[{index}]")
    value = game.get("decision")
    if value is not None and not member(value, DECISIONS):
        raise DatasetError(
            path,
            f"unknown decision {value!r} (expected one of {', '.join(DECISIONS)} or null)",
            line=line,
            field=f"judgments[{index}].decision",
        )
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


def _label(record: Mapping[str, Any], path: Path | None, line: int | None) -> Letter:
    value = require(record, "label", path, line)
    if not member(value, _LABELS):
        raise DatasetError(path, f"unknown label {value!r} (expected 'A>B' or 'B>A')", line=line, field="label")
    return _LABELS[value]


def original_order_decisions(
    record: Mapping[str, Any], path: Path | None = None, line: int | None = None
) -> tuple[str | None, str | None]:
    """The two games' decisions in the original order (g2's flipped)."""
    games = _games(record, path, line)
    return _decision(games[0], path, line, 0), _FLIP[_decision(games[1], path, line, 1)]


def judgebench_pair_score(record: Mapping[str, Any], path: Path | None = None, line: int | None = None) -> int:
    """JudgeBench's score of one pair: +1 per game agreeing with the label, -1 per game against it.

    Ties and null decisions count 0; g2 (swapped order) is flipped first. Range -2..2.
    """
    label = _label(record, path, line)
    want, against = ("A>B", "B>A") if label == "A" else ("B>A", "A>B")
    score = 0
    for decision in original_order_decisions(record, path, line):
        score += 1 if decision == want else -1 if decision == against else 0
    return score


def judgebench_score(records: Iterable[Mapping[str, Any]]) -> float:
    """JudgeBench accuracy of one judge's raw output records: the share of pairs scoring > 0."""
    scores = [judgebench_pair_score(record) for record in records]
    if not scores:
        raise ValueError("judgebench_score needs at least one record")
    return sum(score > 0 for score in scores) / len(scores)


# ---------------------------------------------------------------- names and kinds


def _short_model(model: str, hint: str | None = None) -> str:
    short = model
    if hint and "/" in hint and model in {hint.replace("/", "-"), hint.replace("/", "_"), hint}:
        short = hint.rsplit("/", 1)[1]
    elif "/" in model:
        short = model.rsplit("/", 1)[1]
    elif "_" in model:
        short = model.split("_", 1)[1]
    return _DATE_SUFFIX.sub("", short)


def _file_fields(path: Path) -> dict[str, str]:
    stem = path.name.removesuffix(".jsonl")
    return dict(part.split("=", 1) for part in stem.split(",") if "=" in part)


def judge_name_from_path(path: str | Path, model_hint: str | None = None) -> str:
    """The short judge name an output file's name describes (see the module docstring).

    ``model_hint`` is the record's ``judge_model`` (``org/name``), used to strip an organisation
    prefix that the file name spells with '-' (``Qwen-Qwen3-1.7B`` -> ``Qwen3-1.7B``).
    """
    path = Path(path)
    fields = _file_fields(path)
    kind, model = fields.get("judge_name"), fields.get("judge_model")
    if not kind or not model:
        raise DatasetError(path, "the file name must carry judge_name=... and judge_model=... (JudgeBench output)")
    rubric = fields.get("rubric_model")
    if rubric and rubric.lower() != "none":
        kind = f"{kind}({_short_model(rubric)})"
    return f"{kind}:{_short_model(model, model_hint)}"


def _judgment(game: Mapping[str, Any]) -> Mapping[str, Any]:
    judgment = game.get("judgment")
    return judgment if isinstance(judgment, Mapping) else {}


def judge_kind(path: str | Path, first: Mapping[str, Any] | None = None) -> Kind:
    """How p_a is computed for this output file: from its ``judge_name``, else from its data."""
    file_kind = _file_fields(Path(path)).get("judge_name", "")
    if file_kind == "reward_model":
        return "reward"
    if file_kind == "arena_hard":
        return "verdict"
    if "rubric" in file_kind:
        return "rubric"
    games = first.get("judgments") if first else None
    if isinstance(games, list) and games and isinstance(games[0], Mapping):
        judgment = _judgment(games[0])
        if "scores" in judgment:
            return "reward"
        if "score_A" in judgment and "score_B" in judgment:
            return "rubric"
        if isinstance(judgment.get("response"), str) and VERDICT_RE.search(judgment["response"]):
            return "verdict"
    return "decision"


# ---------------------------------------------------------------- p_a rules


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
            value = json.loads(value)
        except json.JSONDecodeError:
            raise DatasetError(path, f"must be a list of two scores (got {value!r})", line=line, field=field) from None
    if not isinstance(value, list) or len(value) != 2:
        raise DatasetError(path, f"must be a list of two scores (got {value!r})", line=line, field=field)
    return as_float(value[0], path, line, field), as_float(value[1], path, line, field)


def _reward(games, decisions, path, line, notes, signals) -> float | None:
    margins = []
    for index, game in enumerate(games):
        judgment = _judgment(game)
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
        text = _judgment(game).get("response")
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
        judgment = _judgment(game)
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
    judgment = _judgment(games[0])
    if kind == "rubric":
        parts = [f"[{key[-1]}] {judgment[key]}" for key in ("raw_judge_A", "raw_judge_B") if judgment.get(key)]
        return "\n".join(parts)
    response = judgment.get("response")
    return response if isinstance(response, str) else ""


def vote_from_record(
    record: Mapping[str, Any], judge: str, kind: Kind, path: Path | None = None, line: int | None = None
) -> JudgeVote:
    """One judge's vote on one pair from its raw output record (rules in the module docstring)."""
    path = path or Path("<record>")
    games = _games(record, path, line)
    decisions = original_order_decisions(record, path, line)
    notes: list[str] = []
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
        if 1 in signs and -1 in signs:
            error = "games disagree"
        elif all(d is None for d in decisions):
            error = "no decision"
        else:
            error = "tie"
        return JudgeVote.invalid(judge, "recorded", error, p_a=p_a, **common)
    except ValidationError as exc:
        raise from_validation(exc, path, line) from exc


# ---------------------------------------------------------------- loading


def _item(record: Mapping[str, Any], path: Path, line: int) -> PairwiseItem:
    pair_id = require(record, "pair_id", path, line)
    source = as_text(require(record, "source", path, line), path, line, "source")
    metadata: dict[str, Any] = {"source": source}
    for key in ("original_id", "response_model"):
        if key in record:
            metadata[key] = record[key]
    try:
        return PairwiseItem(
            id=str(pair_id),
            question=as_text(require(record, "question", path, line), path, line, "question"),
            answer_a=as_text(require(record, "response_A", path, line), path, line, "response_A"),
            answer_b=as_text(require(record, "response_B", path, line), path, line, "response_B"),
            label=_label(record, path, line),
            category=source.split("-", 1)[0] or None,
            metadata=metadata,
        )
    except ValidationError as exc:
        raise from_validation(exc, path, line) from exc


def _read_pairs(path: Path) -> dict[str, PairwiseItem]:
    items: dict[str, PairwiseItem] = {}
    first_line: dict[str, int] = {}
    for line, record in iter_jsonl(path):
        item = _item(record, path, line)
        if item.id in items:
            raise DatasetError(path, f"duplicate pair_id {item.id!r} (first at line {first_line[item.id]})", line=line, field="pair_id")
        items[item.id] = item
        first_line[item.id] = line
    if not items:
        raise DatasetError(path, "no pairs in the file")
    return items


def load_judgebench(pairs: str | Path | None = None, outputs: Sequence[str | Path] = ()) -> list[JudgedItem]:
    """Items of the pairs file, each with one vote per output file (in the given order).

    Without a pairs file the items come from the first output file (its records carry the pair).
    """
    output_paths = [Path(p) for p in outputs]
    if pairs is None and not output_paths:
        raise ValueError("load_judgebench needs a pairs file or at least one output file")
    with paused_gc():
        return _load(Path(pairs) if pairs is not None else None, output_paths)


def _load(pairs: Path | None, output_paths: list[Path]) -> list[JudgedItem]:
    items = _read_pairs(pairs) if pairs is not None else _read_pairs(output_paths[0])
    votes: dict[str, list[JudgeVote]] = {item_id: [] for item_id in items}
    names: dict[str, Path] = {}
    for path in output_paths:
        first = first_record(path) or {}
        games = first.get("judgments")
        hint = None
        if isinstance(games, list) and games and isinstance(games[0], Mapping):
            model = _judgment(games[0]).get("judge_model")
            hint = model if isinstance(model, str) else None
        name = judge_name_from_path(path, hint)
        if name in names:
            raise DatasetError(path, f"judge {name!r} is already loaded from {names[name]}")
        names[name] = path
        kind = judge_kind(path, first)
        seen: dict[str, int] = {}
        for line, record in iter_jsonl(path):
            pair_id = str(require(record, "pair_id", path, line))
            if pair_id not in items:
                raise DatasetError(path, f"pair {pair_id!r} is not in the pairs file", line=line, field="pair_id")
            if pair_id in seen:
                raise DatasetError(path, f"duplicate pair_id {pair_id!r} (first at line {seen[pair_id]})", line=line, field="pair_id")
            seen[pair_id] = line
            if _label(record, path, line) != items[pair_id].label:
                raise DatasetError(path, "disagrees with the pairs file", line=line, field="label")
            votes[pair_id].append(vote_from_record(record, name, kind, path, line))
    return [JudgedItem(item=item, votes=votes[item_id]) for item_id, item in items.items()]


def is_pairs_file(path: Path) -> bool:
    """A JudgeBench pairs file (records without ``judgments``)."""
    first = first_record(path)
    if first is not None:
        return "judgments" not in first and "pair_id" in first
    return path.name.startswith("dataset=judgebench") and "judge_name=" not in path.name


def split_paths(paths: Sequence[str | Path]) -> tuple[Path | None, list[Path]]:
    """(pairs file, output files) from files and directories (a directory: its pairs file and outputs/)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.glob("*.jsonl") if p.is_file()))
            if (path / "outputs").is_dir():
                files.extend(sorted(p for p in (path / "outputs").glob("*.jsonl") if p.is_file()))
        else:
            files.append(path)
    pairs = [p for p in files if is_pairs_file(p)]
    outputs = [p for p in files if p not in pairs]
    if len(pairs) > 1:
        raise DatasetError(pairs[1], f"more than one JudgeBench pairs file (also {pairs[0]})")
    return (pairs[0] if pairs else None), outputs


def load_judgebench_paths(paths: Sequence[str | Path]) -> list[JudgedItem]:
    """:func:`load_judgebench` on files and directories, sorted out by :func:`split_paths`."""
    pairs, outputs = split_paths(paths)
    return load_judgebench(pairs, outputs)
