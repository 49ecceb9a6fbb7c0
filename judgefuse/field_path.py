"""The one formatter of a pydantic error location as a field path: ``judges[0].model``.

Every room reports validation errors by field (panel files, settings, datasets, HTTP bodies),
and every one of them uses this loop. It imports nothing of ours, so any room may
use it (it sits below ``prompts/`` and ``calibration/`` in the import order of docs/design.md, 'Architecture').
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["field_path"]


def field_path(loc: Iterable[int | str], *, empty: str = "") -> str:
    """``("judges", 0, "model")`` -> ``"judges[0].model"``; ``empty`` when nothing is left.

    Parts pydantic adds for validator wrappers (``function-after[...]``, ...) are dropped:
    they name our code, not a field the user wrote.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.startswith("function-"):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or empty
