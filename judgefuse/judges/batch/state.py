"""The batches a run has submitted, kept beside its output so a restart resumes them.

``{out}.batch.json`` lists every batch of the run: the judge it is for, the uploaded input
file, the batch id once created, the custom ids it carries, and whether its results have been
downloaded. It is rewritten atomically (temporary file, fsync, rename) after each upload, each
creation and each download, so an interrupted run finds every batch it paid for and polls it
instead of submitting the same requests again. The one window left is between the provider
accepting ``POST /batches`` and this file being written (a crash there submits again).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BatchState", "SubmittedBatch"]

_VERSION = 1


@dataclass
class SubmittedBatch:
    """One batch of one judge's requests."""

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
        if not path.exists():
            return cls(path)
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != _VERSION:
            raise ValueError(f"{path}: unknown batch state version {data.get('version')!r}")
        return cls(path, [SubmittedBatch(**entry) for entry in data.get("batches", [])])

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
