"""Install ``jf_example_plugin/`` as a throwaway distribution that ``importlib.metadata`` sees.

The installer writes what ``pip install --target`` would (the package and a ``.dist-info`` with
``METADATA`` and ``entry_points.txt``, read from the plugin's ``pyproject.toml``) into a temp
directory, with no build step and no network: the venv has no ``wheel`` to build with, and a
copy takes milliseconds. The tests then run judgefuse in subprocesses with that directory on
``PYTHONPATH``, so the plugin is found exactly as an installed one is (entry points), and the
test session's own registries never see it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

PLUGIN_SOURCE = Path(__file__).resolve().parent / "jf_example_plugin"
REPO = Path(__file__).resolve().parents[2]


def install_distribution(source: Path, target: Path) -> Path:
    """Copy the packages under ``source/src`` into ``target`` and write their dist-info from
    ``source/pyproject.toml`` (name, version, entry points). Returns ``target``."""
    project = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = project["name"], project["version"]
    target.mkdir(parents=True, exist_ok=True)
    packages = sorted(path for path in (source / "src").iterdir() if (path / "__init__.py").is_file())
    for package in packages:
        shutil.copytree(package, target / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    dist_info = target / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    lines = []
    for group, entries in project.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines.extend(f"{entry} = {value}" for entry, value in entries.items())
        lines.append("")
    (dist_info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
    (dist_info / "top_level.txt").write_text("".join(f"{p.name}\n" for p in packages), encoding="utf-8")
    (dist_info / "INSTALLER").write_text("judgefuse-tests\n", encoding="utf-8")
    return target


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the installed example plugin."""
    return install_distribution(PLUGIN_SOURCE, tmp_path_factory.mktemp("plugin-site"))


def plugin_env(*sites: Path) -> dict[str, str]:
    """The environment of a judgefuse subprocess that sees the plugins installed in ``sites``."""
    env = dict(os.environ)
    paths = [str(REPO), *(str(site) for site in sites), str(REPO / "tests")]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["COLUMNS"] = "200"  # the terminal tables in full (an xdist worker inherits a narrower COLUMNS)
    return env


def run_python(args: Sequence[str], *sites: Path, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with the plugins in ``sites`` installed; output captured as text."""
    return subprocess.run([sys.executable, *args], env=plugin_env(*sites), cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def install_plugin():  # noqa: ANN201 - a helper function
    """:func:`install_distribution`, for a test that builds its own throwaway plugin."""
    return install_distribution


@pytest.fixture(scope="session")
def run_with_sites():  # noqa: ANN201 - a helper function
    """:func:`run_python`: ``run(args, *sites)`` with the plugins installed in ``sites``."""
    return run_python


@pytest.fixture
def run_with_plugin(plugin_site: Path):  # noqa: ANN201 - a helper function
    """``run(args, cwd=None)``: ``python ARGS`` with the example plugin installed."""
    def run(args: Sequence[str], *, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return run_python(args, plugin_site, cwd=cwd, timeout=timeout)

    return run
