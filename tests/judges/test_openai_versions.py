"""The provider-error mapping does not depend on which openai SDK litellm runs on.

The suite itself runs on the locked openai (3.x). litellm's range admits openai 2.20 to 3.x, and
under 2.x litellm wraps provider errors differently (a 408 or 504 stays an HTTP status error; under
3.x it becomes litellm's ``Timeout``). This test runs the litellm half of the transport suite, which
scripts every status, timeouts, dropped connections and garbage bodies against a real loopback
server, in environments that differ from ``.venv`` only in openai: the oldest version the locked
litellm accepts and the newest 2.x. ``scripts/install-openai-variants`` builds them from uv.lock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the oldest openai the locked litellm (1.108) admits, and the newest 2.x on the registry
VARIANTS = ["2.20.0", "2.54.0"]


@pytest.fixture(scope="module")
def variants() -> dict[str, Path]:
    subprocess.run(["bash", str(ROOT / "scripts" / "install-openai-variants"), *VARIANTS], cwd=ROOT, check=True)
    return {v: ROOT / ".tools" / "openai" / v / "bin" / "python" for v in VARIANTS}


@pytest.mark.slow
@pytest.mark.parametrize("version", VARIANTS)
def test_error_mapping_under_another_openai(variants: dict[str, Path], version: str) -> None:
    python = variants[version]
    seen = subprocess.run([str(python), "-c", "import openai; print(openai.__version__)"],
                          capture_output=True, text=True, check=True)
    assert seen.stdout.strip() == version
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    run = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "litellm",
         "tests/judges/test_transport_clients.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and " failed" not in run.stdout


def test_the_suite_itself_runs_on_openai_3() -> None:
    """The locked environment is the third variant; if the lock moves off 3.x, VARIANTS needs a look."""
    import openai

    assert openai.__version__.split(".")[0] == "3", (openai.__version__, sys.executable)
