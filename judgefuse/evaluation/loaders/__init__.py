"""Recorded judgments, read as they are, into ``list[JudgedItem]``.

One loader per source, each with its vote rule documented in its module:
:mod:`.judgebench` (JudgeBench pairs + per-judge output files; its vote rule in
:mod:`.judgebench_votes`), :mod:`.llmbar` (LLMBar datasets +
the compact decisions file), :mod:`.trust_or_escalate` (three judges with letter probabilities),
:mod:`.votes` (our own JSONL, with a crash-safe append-only writer), :mod:`.csv_pairs` (a CSV
of pairs with labels, ties included, and optional vote columns). :func:`load` picks the
loader from the paths (:mod:`.detect`). Every fault in the data is a :class:`DatasetError`
naming file, line and field; a judge's answer the format does not define is not a fault but an
invalid vote, recorded in :class:`UndefinedAnswers` (``strict=True`` makes it an error).
"""

from judgefuse.evaluation.loaders.answers import UndefinedAnswer, UndefinedAnswers
from judgefuse.evaluation.loaders.csv_pairs import load_csv
from judgefuse.evaluation.loaders.detect import FORMATS, Format, detect_format, load, timed_load
from judgefuse.evaluation.loaders.errors import DatasetError
from judgefuse.evaluation.loaders.judgebench import judge_name_from_path, load_judgebench, load_judgebench_paths
from judgefuse.evaluation.loaders.judgebench_votes import judgebench_pair_score, judgebench_score, vote_from_record
from judgefuse.evaluation.loaders.llmbar import load_llmbar
from judgefuse.evaluation.loaders.trust_or_escalate import load_toe
from judgefuse.evaluation.loaders.votes import VotesWriter, done_ids, read_votes

__all__ = [
    "FORMATS",
    "DatasetError",
    "Format",
    "UndefinedAnswer",
    "UndefinedAnswers",
    "VotesWriter",
    "detect_format",
    "done_ids",
    "judge_name_from_path",
    "judgebench_pair_score",
    "judgebench_score",
    "load",
    "load_csv",
    "load_judgebench",
    "load_judgebench_paths",
    "load_llmbar",
    "load_toe",
    "read_votes",
    "timed_load",
    "vote_from_record",
]
