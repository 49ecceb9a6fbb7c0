"""Each documented install gives a ``judgefuse`` that starts and does what that install promises.

``pip install judgefuse`` is the client and the offline engine; ``[judges]`` adds judging;
``[service]`` serves on its own (it pulls ``[judges]``). A command that needs an extra the
install lacks exits 2 naming it (:mod:`judgefuse.extras`), and every other command still runs.

The slow test builds the wheel from this checkout and installs it into a fresh environment
per combination, the versions pinned by ``uv.lock`` (``uv export`` as constraints), the way a
user's ``pip install`` would resolve them from the registry.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from judgefuse.cli import COMMAND_GROUPS
from judgefuse.extras import EXTRA_OF_MODULE, MissingExtra, missing_extra

ROOT = Path(__file__).resolve().parents[1]
UV = ROOT / ".tools" / "uv" / "bin" / "uv"
VOTES = ROOT / "tests" / "evaluation" / "fixtures" / "ties_votes.jsonl"


def _requirement_name(spec: str) -> str:
    return re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0].lower().replace("_", "-")


def _extras() -> dict[str, set[str]]:
    """Extra -> the distributions it installs (its own requirements and the extras it names)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    raw: dict[str, list[str]] = project["optional-dependencies"]

    def closure(extra: str) -> set[str]:
        out: set[str] = set()
        for spec in raw[extra]:
            name = _requirement_name(spec)
            if name == "judgefuse":
                for inner in re.search(r"\[(.*)\]", spec).group(1).split(","):  # type: ignore[union-attr]
                    out |= closure(inner.strip())
            else:
                out.add(name)
        return out

    return {extra: closure(extra) for extra in raw}


def test_each_module_is_named_with_the_extra_that_installs_it() -> None:
    extras = _extras()
    providers = importlib.metadata.packages_distributions()
    for module, extra in EXTRA_OF_MODULE.items():
        assert extra in extras, f"{module}: no extra {extra!r} in pyproject.toml"
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
        assert dists, f"{module}: not importable in the dev environment"
        assert dists & extras[extra], f"{module} comes from {dists}, which the '{extra}' extra does not list"


def test_the_service_extra_installs_what_judging_needs() -> None:
    extras = _extras()
    assert extras["judges"] <= extras["service"]


def test_a_missing_module_names_its_extra_and_others_stay_bugs() -> None:
    found = missing_extra(ModuleNotFoundError("No module named 'httptools'", name="httptools"))
    assert isinstance(found, MissingExtra) and found.extra == "judges"
    assert "pip install 'judgefuse[judges]'" in str(found)
    sub = missing_extra(ModuleNotFoundError("No module named 'opentelemetry.sdk'", name="opentelemetry.sdk"))
    assert sub is not None and sub.extra == "otel"
    assert missing_extra(ModuleNotFoundError("No module named 'judgefuse.nope'", name="judgefuse.nope")) is None


def test_the_command_table_lists_what_each_group_adds() -> None:
    for module, names in COMMAND_GROUPS:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).add_commands(sub)
        assert tuple(sub.choices) == names, module


def _run(argv: list[str], *, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not UV.exists():
        pytest.skip("uv is installed by scripts/install (.tools/uv)")
    out = tmp_path_factory.mktemp("wheel")
    done = _run([str(UV), "build", "--wheel", "--out-dir", str(out), "--quiet"])
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("judgefuse-*.whl")
    return built


def _environment(tmp: Path, wheel: Path, extra: str | None) -> Path:
    """A fresh environment with the wheel (and ``extra``) at the lock's versions: its bin dir."""
    constraints = tmp / "constraints.txt"
    export = [str(UV), "export", "--quiet", "--frozen", "--no-hashes", "--no-emit-project", "--no-dev",
              "--format", "requirements-txt", "--output-file", str(constraints)]
    if extra:
        export += ["--extra", extra]
    done = _run(export)
    assert done.returncode == 0, done.stderr
    venv = tmp / "venv"
    done = _run([str(UV), "venv", "--quiet", "--python", sys.executable, str(venv)])
    assert done.returncode == 0, done.stderr
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    done = _run([str(UV), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                 "--constraint", str(constraints), target], timeout=900)
    assert done.returncode == 0, done.stderr
    return venv / "bin"


def _serves(bin_dir: Path, tmp: Path) -> None:
    """``judgefuse serve`` with a panel (a judge nothing answers: readiness asks none) until
    ``/readyz`` answers 200."""
    from jf_test_support.ports import free_port

    panel = tmp / "panel.yaml"
    panel.write_text(
        "name: main\nfusion: majority\njudges:\n  - name: j1\n    model: openai/j1\n    backend: direct\n"
        "    api_base: http://127.0.0.1:9/v1\n    mode: sc\n",
        encoding="utf-8",
    )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGEFUSE_")}
    log = (tmp / "serve.log").open("w")
    proc = subprocess.Popen(
        [str(bin_dir / "judgefuse"), "serve", "--port", str(port), "--panel", str(panel),
         "--storage", f"sqlite:///{tmp / 'jf.sqlite3'}"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp / "serve.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
                    assert answer.status == 200
                    return
            except OSError:
                assert time.monotonic() < deadline, (tmp / "serve.log").read_text()
                time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("extra", [None, "judges", "service"])
def test_each_documented_install_starts_and_does_what_it_promises(
    wheel: Path, tmp_path: Path, extra: str | None
) -> None:
    bin_dir = _environment(tmp_path, wheel, extra)
    judgefuse = str(bin_dir / "judgefuse")
    version = _run([judgefuse, "--version"])
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("judgefuse ")
    evaluated = _run([judgefuse, "eval", str(VOTES)])  # the offline engine: every install
    assert evaluated.returncode == 0, evaluated.stderr
    assert "3 items" in evaluated.stdout
    client = _run([str(bin_dir / "python"), "-c", "import judgefuse.client; print(judgefuse.client.Client.__name__)"])
    assert client.returncode == 0 and client.stdout.strip() == "Client", client.stderr
    judge = _run([judgefuse, "judge", "--help"])
    if extra is None:
        assert judge.returncode == 2 and "pip install 'judgefuse[judges]'" in judge.stderr, judge.stderr
    else:
        assert judge.returncode == 0, judge.stderr
    if extra == "service":
        _serves(bin_dir, tmp_path)
    else:  # listed (its --help works), but running it names the extra
        serve = _run([judgefuse, "serve", "--storage", f"sqlite:///{tmp_path / 'jf.sqlite3'}"], timeout=120)
        assert serve.returncode == 2 and "pip install 'judgefuse[service]'" in serve.stderr, serve.stderr
