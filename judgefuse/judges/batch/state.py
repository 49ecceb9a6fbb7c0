"""The batches a run has submitted, kept beside its output so a restart resumes them.

``{out}.batch.json`` lists every batch of the run: the judge it is for, the uploaded input
file, the batch id once created, the custom ids it carries, and whether its results have been
downloaded. It is rewritten atomically (temporary file, fsync, rename) after each upload, each
creation and each download, so an interrupted run finds every batch it paid for and polls it
instead of submitting the same requests again. The one window left is between the provider
accepting ``POST /batches`` and this file being written (a crash there submits again).

It is validated whole on load (:meth:`BatchState.load`): a file that is not UTF-8, not JSON,
nested past :data:`~judgefuse.json_input.MAX_DEPTH`, of another version or of another shape is
a :class:`BatchFileError` naming the file, what is wrong and how to start over, so a run that
cannot resume stops before it sends anything, with exit 2 and no traceback.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from judgefuse.errors import InputError
from judgefuse.field_path import field_path
from judgefuse.json_input import JSONTextError, decode_utf8, parse_json

__all__ = ["BatchFileError", "BatchState", "SubmittedBatch"]

_VERSION = 1


class BatchFileError(InputError, ValueError):
    """A file a batch run keeps beside its output (the state or the answers) that cannot be
    read back. The message names the file, what is wrong and how to start over (``start_over``:
    what moving the file aside costs), so the user can decide."""

    def __init__(self, path: Path, problem: str, start_over: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}; to start over, move it aside and run again: {start_over}")


_STATE_START_OVER = ("the answers already downloaded are kept, the requests of batches not yet "
                     "downloaded are submitted (and paid for) again")


@dataclass
class SubmittedBatch:
    """One batch of one judge's requests."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # an unknown key is a file of another shape

    judge: str
    api_base: str
    input_file_id: str
    custom_ids: list[str]
    batch_id: str | None = None
    status: str = "uploaded"
    collected: bool = False


@dataclass
class BatchState:
    path: Path
    batches: list[SubmittedBatch] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> BatchState:
        """The state kept at ``path`` (empty when there is none), or a BatchFileError."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path)
        except OSError as exc:
            raise BatchFileError(path, f"cannot read it: {exc.strerror or exc}", _STATE_START_OVER) from exc
        try:
            data = parse_json(decode_utf8(raw))
        except JSONTextError as exc:
            where = f" at line {exc.line}" if exc.line is not None else ""
            raise BatchFileError(path, f"{exc.reason}{where}", _STATE_START_OVER) from exc
        if isinstance(data, dict) and "version" in data and data["version"] != _VERSION:
            raise BatchFileError(path, f"batch state version {data['version']!r}, which this judgefuse cannot "
                                 f"read (it reads version {_VERSION})", _STATE_START_OVER)
        try:
            kept = _StateFile.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = field_path(first.get("loc", ()), empty="the whole file")
            raise BatchFileError(path, f"not a batch state file: {where}: {first.get('msg', 'invalid')}",
                                 _STATE_START_OVER) from exc
        return cls(path, kept.batches)

    def open_batches(self) -> list[SubmittedBatch]:
        """Batches whose results are not downloaded yet (to create, poll or download)."""
        return [batch for batch in self.batches if not batch.collected]

    def save(self) -> None:
        text = json.dumps({"version": _VERSION, "batches": [asdict(b) for b in self.batches]}, indent=1)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


class _StateFile(BaseModel):
    """The file's shape, as :meth:`BatchState.save` writes it."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1]
    batches: list[SubmittedBatch]
