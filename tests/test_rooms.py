"""Clean rooms: no module of ``judgefuse`` imports another module's private (``_``) names.

A name shared across modules is public (no underscore); a private one may change without
notice, so importing it ties two modules together behind their backs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "judgefuse"


def _private_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        ours = node.level > 0 or (node.module or "").split(".")[0] == "judgefuse"
        for alias in node.names:
            if ours and alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {alias.name}")
    return found


def test_no_private_names_imported_across_modules() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _private_imports(path)]
    assert not found, "private names imported from other modules:\n" + "\n".join(found)


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from judgefuse.x import public, _private\nfrom .y import (\n    _other,\n)\n")
    hits = _private_imports(sample, root=tmp_path)
    assert [hit.split(": ")[1] for hit in hits] == ["_private", "_other"]
