"""The one error every loader raises for bad input: where it is (file, line, field) and why.

A message reads ``<path>:12: field 'confidence': must be <= 1 (got 1.7)``; without a line
number it is ``<path>: ...`` and without a field the ``field '...':`` part is left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from judgefuse.errors import InputError
from judgefuse.field_path import field_path


class DatasetError(InputError, ValueError):
    """A data file that cannot be read as it claims to be, with the place of the fault."""

    def __init__(
        self,
        path: str | Path | None,
        reason: str,
        *,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.line = line
        self.field = field
        self.reason = reason
        where = str(path) if path is not None else "<input>"
        if line is not None:
            where = f"{where}:{line}"
        what = f"field {field!r}: {reason}" if field else reason
        super().__init__(f"{where}: {what}")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _reason(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    got = err.get("input")
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return "unknown key"
    bounds = {
        "less_than_equal": ("<=", "le"),
        "less_than": ("<", "lt"),
        "greater_than_equal": (">=", "ge"),
        "greater_than": (">", "gt"),
    }
    if kind in bounds:
        op, key = bounds[kind]
        return f"must be {op} {_num(ctx.get(key))} (got {_short(got)})"
    msg = str(err.get("msg", "invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    msg = msg[:1].lower() + msg[1:]
    return f"{msg} (got {_short(got)})"


def from_validation(exc: ValidationError, path: str | Path | None, line: int | None) -> DatasetError:
    """The first error of a pydantic ``ValidationError`` as a :class:`DatasetError`."""
    errors = exc.errors()
    first = errors[0]
    reason = _reason(dict(first))
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    field = field_path(first.get("loc", ())) or None
    return DatasetError(path, reason, line=line, field=field)
