"""What the pair helpers (``Client.judge_pairs``, ``AsyncClient.judge_pairs``) share: turning
a pair into a request, the resume file, the progress bar and the result type.

Memory stays bounded whatever the number of pairs: the pairs are read lazily (a generator over
a 10 GB file is fine), at most ``concurrency`` are in flight, a result is handed to the caller
as soon as its verdict comes back and is not kept. The resume file keeps only the ids of the
pairs already done in memory.

**Resuming.** With ``resume=path`` every finished pair is appended to ``path`` as one JSON line
(``{"index", "id", "verdict"}``, or ``{"index", "id", "error"}`` for a pair the gateway refused)
and flushed at once. A pair that got no answer (:class:`ConnectionFailed`) is not finished and
not written. A later run over the same pairs skips those with a verdict line and judges the
rest (pairs that failed are tried again).

**Stopping.** The run's circuit breaker (:class:`~judgefuse.client.retry.CircuitBreaker`)
opens when the gateway stops answering; the run then raises one :class:`GatewayDown`
(:func:`gateway_down`) naming how many pairs finished and how to resume, instead of each
remaining pair waiting out its own retry deadline. A pair's id is its own ``id`` if it has one, else a digest of its panel,
question and answers (and ``namespace``): so it is the same in every run, and a pair whose
verdict was stored by the gateway but never written to the file (the run was killed between
the two) is replayed from storage instead of judged again (the gateway's single flight: :mod:`judgefuse.service.judging.single_flight`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from judgefuse.client.calls import judge_request
from judgefuse.client.errors import APIError, ConnectionFailed, GatewayDown, InvalidRequest, JudgefuseError
from judgefuse.client.retry import Breaker, BreakerOpen
from judgefuse.json_input import JSONTextError, decode_utf8, parse_json
from judgefuse.service.schemas import VerdictOut

__all__ = ["Pair", "PairResult", "PairRun", "gateway_down", "pair_id"]

Pair = Mapping[str, Any] | Sequence[str]
"""A mapping with ``question``, ``answer_a``, ``answer_b`` (and optionally ``id``, ``panel``,
``category``, ``label``, ``metadata``, ``method``), or a ``(question, answer_a, answer_b)``
tuple."""


@dataclass(frozen=True)
class PairResult:
    """One finished pair: ``index`` is its position in the input; exactly one of ``verdict``
    and ``error`` is set (a pair that failed does not stop the run)."""

    index: int
    id: str
    verdict: VerdictOut | None = None
    error: JudgefuseError | None = None

    @property
    def ok(self) -> bool:
        return self.verdict is not None


def pair_fields(pair: Pair, panel: str | None) -> dict[str, Any]:
    if isinstance(pair, Mapping):
        fields = dict(pair)
    elif isinstance(pair, Sequence) and not isinstance(pair, str) and len(pair) == 3:
        fields = {"question": pair[0], "answer_a": pair[1], "answer_b": pair[2]}
    else:
        raise TypeError(f"a pair is a mapping or a (question, answer_a, answer_b) tuple, not {type(pair).__name__}")
    if panel is not None:
        fields.setdefault("panel", panel)
    return fields


def pair_id(fields: Mapping[str, Any], namespace: str = "") -> str:
    """The pair's own ``id``, else a digest of (namespace, panel, question, answers): the same
    pair has the same id in every run."""
    given = fields.get("id")
    if given:
        return str(given)
    digest = hashlib.sha256()
    for part in (namespace, fields.get("panel") or "", fields["question"], fields["answer_a"], fields["answer_b"]):
        digest.update(str(part).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _error_line(error: JudgefuseError) -> dict[str, Any]:
    if isinstance(error, APIError):
        return {"status": error.status, **error.body.model_dump(exclude_none=True)}
    return {"status": None, "error": str(error)}


class PairRun:
    """One helper run: the pairs still to judge, the resume file, the progress bar. Use as a
    context manager (it opens the file and starts the bar)."""

    def __init__(self, pairs: Iterable[Pair], *, panel: str | None = None,
                 resume: str | os.PathLike[str] | None = None, progress: bool = True,
                 namespace: str = "", description: str = "judging") -> None:
        self.pairs = pairs
        self.panel = panel
        self.namespace = namespace
        self.path = None if resume is None else Path(resume)
        self.done = self._read_done(self.path) if self.path is not None else set()
        self.skipped = 0
        """Pairs found done in the resume file (not judged again, not yielded)."""
        self._file: IO[str] | None = None
        total = len(pairs) if isinstance(pairs, Sequence) else None
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"), TimeRemainingColumn(),
            disable=not progress, transient=False,
        )
        self._task = self._progress.add_task(description, total=total, failed=0)
        self._failed = 0
        self.judged = 0
        """Pairs given a verdict in this run."""

    @staticmethod
    def _read_done(path: Path) -> set[str]:
        done: set[str] = set()
        if not path.exists():
            return done
        with path.open("rb") as lines:
            for line in lines:
                try:
                    record = parse_json(decode_utf8(line))
                except JSONTextError:
                    continue  # a line cut short when the last run was killed (or not ours): judge it again
                if isinstance(record, dict) and record.get("verdict") is not None:
                    done.add(str(record.get("id")))
        return done

    def __enter__(self) -> PairRun:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a+", encoding="utf-8")
            if self._file.tell() > 0:
                self._file.seek(self._file.tell() - 1)
                if self._file.read(1) != "\n":  # a line a killed run left half-written
                    self._file.write("\n")
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()
        if self._file is not None:
            self._file.close()

    def todo(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, request body)`` of each pair not done yet, lazily."""
        for index, pair in enumerate(self.pairs):
            try:
                fields = pair_fields(pair, self.panel)
                fields["id"] = pair_id(fields, self.namespace)
                if fields["id"] in self.done:
                    self.skipped += 1
                    self._progress.advance(self._task)
                    continue
                body = judge_request(fields)
            except InvalidRequest as exc:
                raise InvalidRequest.before_sending(
                    [(f"pairs[{index}].{f.field.removeprefix('body.')}", f.problem) for f in exc.fields]) from exc
            except (TypeError, KeyError) as exc:
                raise InvalidRequest.before_sending([(f"pairs[{index}]", f"{type(exc).__name__}: {exc}")]) from exc
            yield index, body

    def outcome(self, index: int, body: Mapping[str, Any], outcome: object, stopping: bool) -> PairResult | None:
        """:meth:`finish` for one call of a run with a breaker: None for a pair the breaker
        cut off (it is not finished: not yielded, not written, judged by the rerun)."""
        if isinstance(outcome, BreakerOpen) or (stopping and isinstance(outcome, ConnectionFailed)):
            return None
        assert isinstance(outcome, (VerdictOut, BaseException))
        return self.finish(index, body, outcome)

    def finish(self, index: int, body: Mapping[str, Any], outcome: VerdictOut | BaseException) -> PairResult:
        """Record one pair's outcome (file, bar) and make its result; an exception that is not
        the client's (a bug, a cancellation) is raised."""
        line: dict[str, Any] | None
        if isinstance(outcome, VerdictOut):
            result = PairResult(index, body["id"], verdict=outcome)
            line = {"index": index, "id": result.id, "verdict": outcome.model_dump(mode="json")}
            self.judged += 1
        elif isinstance(outcome, ConnectionFailed):  # no answer: not finished, not written
            result = PairResult(index, body["id"], error=outcome)
            line = None
            self._failed += 1
        elif isinstance(outcome, JudgefuseError):
            result = PairResult(index, body["id"], error=outcome)
            line = {"index": index, "id": result.id, "error": _error_line(outcome)}
            self._failed += 1
        else:
            raise outcome
        if self._file is not None and line is not None:
            self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
            self._file.flush()
        self._progress.update(self._task, advance=1, failed=self._failed)
        return result


def gateway_down(run: PairRun, breaker: Breaker, url: str) -> GatewayDown:
    """The one error a run stops with when its breaker opened: what happened, how many pairs
    finished, and the rerun that picks up the rest."""
    finished = run.judged + run.skipped
    if run.path is not None:
        how = (f"run the same call again with resume={str(run.path)!r}: the {finished} finished pair(s) "
               "are skipped, the rest judged")
    else:
        how = ("pass resume=<file> to judge_pairs to skip finished pairs on a rerun (without it a rerun "
               "replays their verdicts from the gateway's storage: pair ids are stable)")
    message = (f"judge_pairs stopped: the gateway at {url} stopped answering ({breaker.reason}); "
               f"{finished} pair(s) finished ({run.judged} in this run, {run.skipped} before); {how}")
    return GatewayDown(message, finished=finished, failures=breaker.in_a_row,
                       outage_s=breaker.policy.outage_s, resume=None if run.path is None else str(run.path))
