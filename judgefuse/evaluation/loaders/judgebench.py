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

How one output record becomes a vote (JudgeBench's own choice rule, p_a by judge kind, invalid
votes) is :mod:`.judgebench_votes`; this module reads the files, names each judge, picks its kind
(:func:`judge_kind`) and pairs the records with the items. Every fault in the data is a
:class:`DatasetError` naming file, line and field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgefuse.evaluation.loaders.answers import UndefinedAnswers
from judgefuse.evaluation.loaders.errors import DatasetError, from_validation
from judgefuse.evaluation.loaders.jsonl import as_text, first_record, iter_jsonl, paused_gc, require
from judgefuse.evaluation.loaders.judgebench_votes import (
    VERDICT_RE,
    Kind,
    judgment_of,
    record_label,
    vote_from_record,
)
from judgefuse.evaluation.loaders.judgebench_votes import sigmoid as sigmoid  # re-exported: tests import it here
from judgefuse.evaluation.loaders.judgebench_votes import verdict_p_shown_a as verdict_p_shown_a  # re-exported
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem

_DATE_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


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
        judgment = judgment_of(games[0])
        if "scores" in judgment:
            return "reward"
        if "score_A" in judgment and "score_B" in judgment:
            return "rubric"
        if isinstance(judgment.get("response"), str) and VERDICT_RE.search(judgment["response"]):
            return "verdict"
    return "decision"


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
            label=record_label(record, path, line),
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


def load_judgebench(
    pairs: str | Path | None = None,
    outputs: Sequence[str | Path] = (),
    *,
    answers: UndefinedAnswers | None = None,
) -> list[JudgedItem]:
    """Items of the pairs file, each with one vote per output file (in the given order).

    Without a pairs file the items come from the first output file (its records carry the pair).
    Undefined decisions are collected in ``answers`` (a lenient collector when omitted; pass
    ``UndefinedAnswers(strict=True)`` to make them errors).
    """
    output_paths = [Path(p) for p in outputs]
    if pairs is None and not output_paths:
        raise ValueError("load_judgebench needs a pairs file or at least one output file")
    with paused_gc():
        return _load(Path(pairs) if pairs is not None else None, output_paths, answers or UndefinedAnswers())


def _load(pairs: Path | None, output_paths: list[Path], answers: UndefinedAnswers) -> list[JudgedItem]:
    items = _read_pairs(pairs) if pairs is not None else _read_pairs(output_paths[0])
    votes: dict[str, list[JudgeVote]] = {item_id: [] for item_id in items}
    names: dict[str, Path] = {}
    for path in output_paths:
        first = first_record(path) or {}
        games = first.get("judgments")
        hint = None
        if isinstance(games, list) and games and isinstance(games[0], Mapping):
            model = judgment_of(games[0]).get("judge_model")
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
            if record_label(record, path, line) != items[pair_id].label:
                raise DatasetError(path, "disagrees with the pairs file", line=line, field="label")
            votes[pair_id].append(vote_from_record(record, name, kind, path, line, answers))
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


def load_judgebench_paths(
    paths: Sequence[str | Path], *, answers: UndefinedAnswers | None = None
) -> list[JudgedItem]:
    """:func:`load_judgebench` on files and directories, sorted out by :func:`split_paths`."""
    pairs, outputs = split_paths(paths)
    return load_judgebench(pairs, outputs, answers=answers)
