"""The import contracts in the gate (``lint-imports``, run by ``scripts/test``) hold, and fail on a
planted back-import (issue 42): a copy of the package where the kernel imports the gateway,
a room above it, is reported as breaking the service folders' layers contract."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the package copied under ``root`` (found first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "judgefuse", tmp_path / "judgefuse", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_a_planted_back_import_breaks_the_service_layers(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    clean = _lint(root)
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-2000:]
    kernel = root / "judgefuse" / "service" / "kernel" / "panels.py"
    kernel.write_text(kernel.read_text(encoding="utf-8")
                      + "\nfrom judgefuse.service.gateway import Gateway  # planted back-import\n",
                      encoding="utf-8")
    planted = _lint(root)
    assert planted.returncode != 0, planted.stdout[-3000:]
    assert "Service folders" in planted.stdout and "BROKEN" in planted.stdout, planted.stdout[-3000:]
    assert "judgefuse.service.kernel.panels -> judgefuse.service.gateway" in planted.stdout, planted.stdout[-3000:]
