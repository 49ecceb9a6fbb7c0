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
