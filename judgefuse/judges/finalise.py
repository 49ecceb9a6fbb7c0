"""The one place a vote is finalised before it leaves its judge: secrets out, sizes bounded.

Every vote a :class:`~judgefuse.judges.judge.Judge` returns passes through :func:`finalise_vote`
(valid, invalid, timed out, fallen back, position-swapped alike), so no elicitation path can
skip it. It exists because a vote carries text the provider chose: the model's raw reply, the
explanation read from it, parse errors that quote it, transport errors and notes. A provider or
a model that echoes the API key (verbatim or encoded) would otherwise put the key into the HTTP
response, ``GET /v1/verdicts``, SQLite and Redis; a model that writes megabytes would put
megabytes into every stored verdict row.

* Secrets: every text field is scrubbed of the judge's key and its encodings
  (:mod:`~judgefuse.judges.transport.redaction`), *before* any cut.
* Size: ``raw`` and ``explanation`` are cut to ``max_raw_bytes`` UTF-8 bytes (the judge's
  ``max_raw_bytes`` setting, default 16 KiB), ``error`` and each note to
  :data:`MAX_NOTE_BYTES`; a cut is recorded in ``notes`` (``"raw reply truncated: ..."``).
"""

from __future__ import annotations

from collections.abc import Iterable

from judgefuse.judges.transport.redaction import SecretScrubber, cap_utf8, scrubber_for
from judgefuse.judges.types import JudgeVote

__all__ = ["DEFAULT_MAX_RAW_BYTES", "MAX_NOTE_BYTES", "finalise_vote"]

DEFAULT_MAX_RAW_BYTES = 16 * 1024
MAX_NOTE_BYTES = 2048


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _bounded(text: str, scrubber: SecretScrubber, max_bytes: int) -> tuple[str, bool]:
    """(``text`` scrubbed, then cut to at most ``max_bytes`` UTF-8 bytes; whether it was cut).

    A character is at least one byte, so scrubbing and cutting a head of ``max_bytes + 1``
    characters (plus the scrubber's margin, inside :meth:`SecretScrubber.cut`) decides it: a
    multi-megabyte reply costs no more than its kept part. A fragment of a key left at either
    cut is removed.
    """
    clean, chars_cut = scrubber.cut(text, max_bytes + 1)
    capped, bytes_cut = cap_utf8(clean, max_bytes)
    if not (chars_cut or bytes_cut):
        return clean, False
    # the byte cut is a new cut: drop a fragment it made (>= 8 chars out, 3 in: never grows)
    return scrubber.drop_fragment(capped), True


def _fits(vote: JudgeVote, max_raw_bytes: int) -> bool:
    """Whether every text of ``vote`` is within its bound even at 4 UTF-8 bytes a character
    (the common vote: a short reply, no error, no notes), so no cut can apply."""
    raw_chars, note_chars = max_raw_bytes // 4, MAX_NOTE_BYTES // 4
    return (
        len(vote.raw) <= raw_chars
        and len(vote.explanation) <= raw_chars
        and (vote.error is None or len(vote.error) <= note_chars)
        and all(len(note) <= note_chars for note in vote.notes)
    )


def finalise_vote(vote: JudgeVote, *, secrets: Iterable[str | None] = (), max_raw_bytes: int) -> JudgeVote:
    """``vote`` with its text scrubbed of ``secrets`` and bounded in size (module docstring)."""
    if max_raw_bytes < 1:
        raise ValueError(f"max_raw_bytes must be >= 1, got {max_raw_bytes}")
    scrubber = scrubber_for(*secrets)
    if not scrubber and _fits(vote, max_raw_bytes):
        return vote  # nothing to scrub, nothing to cut: the loop below would change nothing
    update: dict[str, object] = {}
    added: list[str] = []
    for field in ("raw", "explanation"):
        value: str = getattr(vote, field)
        if not value:
            continue
        bounded, was_cut = _bounded(value, scrubber, max_raw_bytes)
        if was_cut:
            label = "raw reply" if field == "raw" else "explanation"
            added.append(
                f"{label} truncated: kept {_utf8_size(bounded)} of {_utf8_size(value)} bytes (max_raw_bytes)"
            )
        if bounded != value:
            update[field] = bounded
    if vote.error:
        error = _bounded(vote.error, scrubber, MAX_NOTE_BYTES)[0]
        if error != vote.error:
            update["error"] = error
    notes = [_bounded(note, scrubber, MAX_NOTE_BYTES)[0] for note in vote.notes]
    if notes != vote.notes or added:
        update["notes"] = [*notes, *added]
    return vote.model_copy(update=update) if update else vote
