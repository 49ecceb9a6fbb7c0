"""The ``calibration`` and ``fusion`` packages re-export their names lazily (PEP 562).

Two things can go wrong: a name listed for type checkers but missing from the lazy table (it
then fails at run time only), and an eager import creeping back so that the Python client pays
for numpy and scipy again (3.9 s of CPU at import before; docs/python-client.md).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("judgefuse.calibration", "judgefuse.fusion")


def _type_checking_names(package: str) -> dict[str, str]:
    """Name -> submodule as the ``if TYPE_CHECKING:`` block of the package imports it."""
    path = ROOT / package.replace(".", "/") / "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imported in node.body:
                assert isinstance(imported, ast.ImportFrom)
                for alias in imported.names:
                    found[alias.name] = (imported.module or "").rsplit(".", 1)[-1]
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_every_typed_name_is_exported_lazily_from_its_module(package: str) -> None:
    module = importlib.import_module(package)
    typed = _type_checking_names(package)
    assert typed, "no TYPE_CHECKING block found"
    assert typed == module._MODULE_OF
    assert set(module.__all__) <= set(typed)
    for name, submodule in typed.items():
        value = getattr(module, name)
        assert value is getattr(importlib.import_module(f"{package}.{submodule}"), name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_importing_the_client_loads_no_numerics() -> None:
    code = (
        "import sys, judgefuse.client\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'scipy', 'sklearn'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
