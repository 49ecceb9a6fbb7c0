"""Answers a format does not define: data (an invalid vote), not a broken record.

Published benchmark outputs contain judge answers outside the documented values (a real
JudgeBench file has ``"decision": "A>A"``). A judge's odd answer is a fact about the judge: the
loaders keep it as an invalid answer with the reason, exactly as the benchmark's own scorer
counts it (JudgeBench: such a game matches neither order of the label, so it scores 0). A record
that is itself broken (bad JSON, a missing key, a confidence of 1.7) stays a :class:`DatasetError`.

:class:`UndefinedAnswers` is passed to a loader and collects every such answer (file, line,
field, judge, value). With ``strict=True`` the first one is raised as a DatasetError instead,
for a user who wants to know their file is not what the format says (``--strict``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgefuse.evaluation.loaders.errors import DatasetError


@dataclass(frozen=True)
class UndefinedAnswer:
    """One judge answer outside the format's values, where it was found."""

    path: Path | None
    line: int | None
    field: str
    judge: str
    value: Any

    @property
    def reason(self) -> str:
        """The text kept on the vote (its ``error`` or ``notes``)."""
        return f"undefined answer {self.value!r} in {self.field}"


@dataclass
class UndefinedAnswers:
    """Collector of undefined answers over one load; ``strict`` turns the first into an error."""

    strict: bool = False
    found: list[UndefinedAnswer] = field(default_factory=list)

    def add(
        self, path: Path | None, line: int | None, field: str, judge: str, value: Any, *, expected: str
    ) -> UndefinedAnswer:
        """Record one undefined answer (or raise it as a DatasetError when strict)."""
        if self.strict:
            raise DatasetError(path, f"undefined answer {value!r} (expected {expected})", line=line, field=field)
        answer = UndefinedAnswer(path, line, field, judge, value)
        self.found.append(answer)
        return answer

    def per_judge(self) -> Counter[str]:
        """How many undefined answers each judge gave."""
        return Counter(answer.judge for answer in self.found)

    def summary(self) -> list[str]:
        """One line per file: how many, which judges, the first place; empty when none."""
        by_file: dict[Path | None, list[UndefinedAnswer]] = {}
        for answer in self.found:
            by_file.setdefault(answer.path, []).append(answer)
        lines = []
        for path, answers in by_file.items():
            first = answers[0]
            judges = Counter(answer.judge for answer in answers)
            counted = ", ".join(f"{judge}: {n}" for judge, n in judges.items())
            where = f"{path}:{first.line}" if first.line is not None else str(path)
            lines.append(
                f"{path}: {len(answers)} answer{'s' if len(answers) != 1 else ''} the format does not define "
                f"({counted}), counted as invalid; first at {where} field {first.field!r}: {first.value!r} "
                "(--strict makes them errors)"
            )
        return lines
