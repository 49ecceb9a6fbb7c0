"""Write a file all at once or not at all.

A report that dies half-way must not leave a truncated HTML or JSON file that looks like a
result. We write to a temporary file in the same directory (so the rename cannot cross file
systems), fsync it, and ``os.replace`` it over the target, which is atomic on POSIX.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def _file_mode(target: Path) -> int:
    """The mode a plain ``open(target, "w")`` would give: the existing file's, else 0o666 & ~umask.

    ``mkstemp`` creates its file 0600, which would make every report private to its writer.
    """
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically; return the resolved path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as tmp:
            os.fchmod(tmp.fileno(), _file_mode(target))
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target.resolve()
