"""LLMBar recorded judgments -> ``list[JudgedItem]``.

Inputs: ``Dataset/<subset>/dataset.json`` (``input``, ``output_1``, ``output_2``, ``label`` 1 | 2,
a string in ``Processed/*``) and ``llmbar_decisions_compact.jsonl`` (one row per (subset, idx,
base_llm, strategy): ``label``, ``winner_swap_false``, ``winner_swap_true`` ["1" | "2" | null]
[, ``score_1``, ``score_2``]). A row's ``subset`` is the dataset's path under ``Dataset/``
(``LLMBar/Adversarial/Neighbor``, ``Processed/LLMEval^2``, ``CaseStudy/Base_9``, ...) and ``idx`` its
0-based position in that file; the row's label must equal the dataset's.

Items: id ``<subset>/<idx>``, output_1 -> A, output_2 -> B, label 1 -> A, category = subset; in the
order subsets first appear in the decisions file, then by idx. Only items that have at least one
decision row are loaded (the dataset files carry no judgments of their own).

Judges: each (base_llm, strategy) is one judge named ``<base_llm>/<strategy>`` (``GPT-4/Vanilla``),
votes in the order judges first appear in the decisions file.

Rule (the winners of the two orders are already mapped back to the original order):
* choice by agreement: both orders name the same output -> that letter; they differ -> invalid,
  ``position inconsistent``; one order missing -> invalid, ``one order missing``; both missing ->
  invalid, ``no decision``.
* ``p_a`` by Laplace's rule of succession over the orders that gave a winner:
  ``(orders for A + 1) / (orders + 2)``: 0.75 when both agree on A, 0.25 on B, 0.5 when they
  disagree, 2/3 or 1/3 with one order; None with none. Two binary answers cannot justify more
  confidence than that, and agreement never means certainty.
* the Rating strategies add ``score_1``/``score_2`` (the judge's 0-10 ratings of output 1 and 2):
  signal ``margin = score_1 - score_2`` on that scale (left out when a score is empty).
``samples`` holds the two orders' letters (swap false, swap true).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from judgefuse.evaluation.loaders.answers import UndefinedAnswers
from judgefuse.evaluation.loaders.errors import DatasetError
from judgefuse.evaluation.loaders.jsonl import as_float, as_text, iter_jsonl, member, paused_gc, read_json
from judgefuse.judges.types import JudgedItem, JudgeVote, Letter, PairwiseItem

DECISIONS_FILE = "llmbar_decisions_compact.jsonl"
_WINNER: dict[Any, Letter | None] = {"1": "A", "2": "B", 1: "A", 2: "B", None: None}
_LABEL: dict[Any, Letter] = {1: "A", 2: "B", "1": "A", "2": "B"}
_EXPECTED = "'1', '2' or null"


def _dataset(root: Path, subset: str, path: Path, line: int) -> list[PairwiseItem]:
    file = root / subset / "dataset.json"
    if ".." in Path(subset).parts or not file.is_file():
        raise DatasetError(path, f"no dataset file for subset {subset!r} (looked for {file})", line=line, field="subset")
    records = read_json(file)
    if not isinstance(records, list):
        raise DatasetError(file, "must be a JSON list of items")
    items = []
    for idx, record in enumerate(records):
        where = f"[{idx}]"
        if not isinstance(record, dict):
            raise DatasetError(file, "must be an object", field=where)
        for key in ("input", "output_1", "output_2", "label"):
            if key not in record:
                raise DatasetError(file, "required key is missing", field=f"{where}.{key}")
        label = record["label"]
        if not member(label, _LABEL):
            raise DatasetError(file, f"unknown label {label!r} (expected 1 or 2)", field=f"{where}.label")
        items.append(
            PairwiseItem(
                id=f"{subset}/{idx}",
                question=as_text(record["input"], file, None, f"{where}.input"),
                answer_a=as_text(record["output_1"], file, None, f"{where}.output_1"),
                answer_b=as_text(record["output_2"], file, None, f"{where}.output_2"),
                label=_LABEL[label],
                category=subset,
                metadata={"subset": subset, "idx": idx},
            )
        )
    return items


def _margin(row: dict[str, Any], path: Path, line: int) -> float | None:
    s1, s2 = row.get("score_1"), row.get("score_2")
    if s1 in (None, "") or s2 in (None, ""):
        return None
    return as_float(s1, path, line, "score_1") - as_float(s2, path, line, "score_2")


@cache
def _shape(swap_false: Any, swap_true: Any) -> tuple[tuple[Letter | None, ...], dict[str, Any]]:
    """The part of a vote fixed by the two winners (known values of ``_WINNER``): computed once."""
    letters = (_WINNER[swap_false], _WINNER[swap_true])
    decided = [letter for letter in letters if letter is not None]
    p_a = (sum(letter == "A" for letter in decided) + 1) / (len(decided) + 2) if decided else None
    fields: dict[str, Any] = dict(mode="recorded", p_a=p_a, raw=json.dumps([swap_false, swap_true]), calls=2)
    if len(decided) == 2 and decided[0] == decided[1] and p_a is not None:
        fields["choice"] = decided[0]
        fields["confidence"] = p_a if decided[0] == "A" else 1.0 - p_a
    else:
        fields["error"] = (
            "position inconsistent" if len(decided) == 2 else "one order missing" if decided else "no decision"
        )
    return letters, fields


def _vote(judge: str, swap_false: Any, swap_true: Any, margin: float | None) -> JudgeVote:
    """The vote of one row; the winners must already be known values of ``_WINNER``."""
    letters, fields = _shape(swap_false, swap_true)
    signals = {} if margin is None else {"margin": margin}
    return JudgeVote(judge=judge, samples=list(letters), signals=signals, **fields)


def load_llmbar(
    root: str | Path, decisions: str | Path | None = None, *, answers: UndefinedAnswers | None = None
) -> list[JudgedItem]:
    """LLMBar items judged by every (base LLM, strategy) pair (rules in the module docstring).

    ``root`` is the folder holding ``Dataset/`` (and, by default, the decisions file). A winner
    outside ``'1' | '2' | null`` is an undefined answer: that order reads as missing (so the vote
    is invalid, with the answer as its error) and it is recorded in ``answers`` (lenient when
    omitted; ``UndefinedAnswers(strict=True)`` makes it an error).
    """
    with paused_gc():
        return _load_llmbar(Path(root), decisions, answers or UndefinedAnswers())


def _load_llmbar(root: Path, decisions: str | Path | None, answers: UndefinedAnswers | None) -> list[JudgedItem]:
    dataset_root = root / "Dataset"
    path = Path(decisions) if decisions is not None else root / DECISIONS_FILE
    if not dataset_root.is_dir():
        raise DatasetError(root, "no Dataset/ folder (LLMBar's dataset.json files)")
    subsets: dict[str, list[PairwiseItem]] = {}
    votes: dict[tuple[str, int], list[JudgeVote]] = {}
    judges: dict[str, int] = {}
    seen: set[tuple[str, int, str]] = set()
    for line, row in iter_jsonl(path):
        try:
            subset, idx, base, strategy, label = (
                row["subset"], row["idx"], row["base_llm"], row["strategy"], row["label"]
            )
        except KeyError as exc:
            raise DatasetError(path, "required key is missing", line=line, field=str(exc.args[0])) from None
        if not isinstance(subset, str) or not subset:
            raise DatasetError(path, f"must be a non-empty string (got {subset!r})", line=line, field="subset")
        if subset not in subsets:
            subsets[subset] = _dataset(dataset_root, subset, path, line)
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise DatasetError(path, f"must be an integer (got {idx!r})", line=line, field="idx")
        if not isinstance(base, str) or not isinstance(strategy, str) or not base or not strategy:
            field = "base_llm" if not isinstance(base, str) or not base else "strategy"
            raise DatasetError(path, f"must be a non-empty string (got {row[field]!r})", line=line, field=field)
        if not member(label, _LABEL):
            raise DatasetError(path, f"unknown label {label!r} (expected 1 or 2)", line=line, field="label")
        items = subsets[subset]
        if not 0 <= idx < len(items):
            raise DatasetError(path, f"no item {idx} in {subset!r} ({len(items)} items)", line=line, field="idx")
        if items[idx].label != _LABEL[label]:
            raise DatasetError(path, "disagrees with the dataset file", line=line, field="label")
        judge = f"{base}/{strategy}"
        key = (subset, idx, judge)
        if key in seen:
            raise DatasetError(path, f"a second row for judge {judge!r} on {subset}/{idx}", line=line)
        seen.add(key)
        judges.setdefault(judge, len(judges))
        winners = {"winner_swap_false": row.get("winner_swap_false"), "winner_swap_true": row.get("winner_swap_true")}
        undefined: list[str] = []
        for field, value in winners.items():
            if not member(value, _WINNER):
                if answers is None:
                    raise DatasetError(path, f"unknown winner {value!r} (expected {_EXPECTED})", line=line, field=field)
                undefined.append(answers.add(path, line, field, judge, value, expected=_EXPECTED).reason)
                winners[field] = None
        margin = _margin(row, path, line) if "score_1" in row or "score_2" in row else None
        vote = _vote(judge, winners["winner_swap_false"], winners["winner_swap_true"], margin)
        if undefined:  # one order at most is left, so the vote is invalid: its reason is the odd answer
            vote = vote.model_copy(update={"error": "; ".join(undefined), "notes": undefined})
        votes.setdefault((subset, idx), []).append(vote)
    if not seen:
        raise DatasetError(path, "no decisions in the file")
    out = []
    for subset, items in subsets.items():
        for idx, item in enumerate(items):
            item_votes = votes.get((subset, idx))
            if item_votes:
                item_votes.sort(key=lambda v: judges[v.judge])
                out.append(JudgedItem(item=item, votes=item_votes))
    return out


def llmbar_root(paths: Sequence[str | Path]) -> tuple[Path, Path | None]:
    """(root holding Dataset/, decisions file) from the paths given to :func:`load`."""
    root: Path | None = None
    decisions: Path | None = None
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            if (path / "Dataset").is_dir():
                root = path
            elif path.name == "Dataset":
                root = path.parent
            else:
                raise DatasetError(path, "not an LLMBar folder (no Dataset/ inside)")
        elif path.name == "dataset.json":
            for parent in path.parents:
                if parent.name == "Dataset":
                    root = parent.parent
                    break
            else:
                raise DatasetError(path, "an LLMBar dataset.json must sit under a Dataset/ folder")
        else:
            decisions = path
    if root is None:
        if decisions is None:
            raise DatasetError(None, "no LLMBar paths given")
        root = decisions.parent
    return root, decisions
