"""Shared test fixtures: where the real labelled data lives (``../shared/data`` beside the repo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("JUDGEFUSE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real datasets (JudgeBench, LLMBar, Trust-or-Escalate); the suite needs them."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"real data not found at {SHARED_DATA}: set JUDGEFUSE_SHARED_DATA")
    return SHARED_DATA


# Refit workers at nice 2, not the product's 19 (judgefuse/service/learning/worker_priority.py):
# beside other load at nice 0 (a busy CI machine, the other xdist worker) a worker at 19 gets ~1%
# of a core and a 22 s refit test ran past its 300 s timeout. 2 still differs from the tests' own
# 0, so the tests that read the workers' and the forkserver's nice still see them step back.
os.environ.setdefault("JUDGEFUSE_REFIT_NICE", "2")
