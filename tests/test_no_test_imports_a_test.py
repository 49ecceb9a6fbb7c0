"""No test module imports another test module (issue 42, item 5): what tests share lives in a
support module (``*_support.py``, ``jf_test_support``) or a ``conftest.py`` fixture, so running
or deleting one test file never runs or breaks another's import."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def _test_modules(names: set[str], ours: set[str]) -> set[str]:
    """Which of ``names`` are this suite's test modules (by file name, as the pythonpath
    finds them, or as ``tests.``...); a library's own ``test_case`` module is not one."""
    return {name for name in names
            if name.split(".")[0] in ours or (name.startswith("tests.") and name.rpartition(".")[2] in ours)}


def test_no_test_module_imports_another() -> None:
    paths = list(TESTS.rglob("test_*.py"))
    ours = {path.stem for path in paths}
    found = sorted(
        f"{path.relative_to(TESTS)} imports {name}"
        for path in paths
        for name in _test_modules(_imported_modules(path), ours)
    )
    assert not found, "\n".join(found)


def test_the_check_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    planted = tmp_path / "test_planted.py"
    planted.write_text("from test_storage import make_record\nimport os\nfrom deepeval.test_case import X\n",
                       encoding="utf-8")
    assert _test_modules(_imported_modules(planted), {"test_storage", "test_planted"}) == {"test_storage"}
