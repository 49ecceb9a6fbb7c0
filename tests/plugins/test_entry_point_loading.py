"""The entry-point loader in-process: lazy, once per group, failures recorded, origins named.

Each test uses its own entry-point group, so nothing it loads reaches judgefuse's registries.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from judgefuse import entry_points as ep


def _distribution(site: Path, group: str, entries: dict[str, str], modules: dict[str, str]) -> None:
    for name, text in modules.items():
        (site / f"{name}.py").write_text(text, encoding="utf-8")
    info = site / "jfx_loader_test-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jfx-loader-test\nVersion: 1.2\n", encoding="utf-8")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}", encoding="utf-8")


def test_load_group_imports_once_and_records_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    group = f"judgefuse.test_loader_{tmp_path.name}"
    _distribution(tmp_path, group, {"good": "jfx_loader_good", "bad": "jfx_loader_bad", "raises": "jfx_loader_raises"}, {
        "jfx_loader_good": "import judgefuse.entry_points as ep\nCOUNT = 1\nWHERE = ep.origin(__name__)\n"
                           "BUILTIN = ep.origin('judgefuse.fusion.voting')\n",
        "jfx_loader_raises": "raise RuntimeError('plugin exploded')\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    loads = {load.name: load for load in ep.load_group(group)}
    assert set(loads) == {"good", "bad", "raises"}
    assert loads["good"].error is None and loads["good"].distribution == "jfx-loader-test 1.2"
    assert loads["bad"].error is not None and loads["bad"].error.startswith("ModuleNotFoundError")
    assert loads["raises"].error == "RuntimeError: plugin exploded"
    good = sys.modules["jfx_loader_good"]
    assert good.WHERE == f"jfx-loader-test 1.2 ({group}: good = jfx_loader_good)"
    assert good.BUILTIN == ep.BUILTIN  # judgefuse's own modules are built-in even while a plugin loads
    good.COUNT = 2
    assert ep.load_group(group) == list(loads.values())  # cached: not imported again
    assert sys.modules["jfx_loader_good"].COUNT == 2
    assert ep.origin("tests.something") == "module tests.something"


def test_an_empty_group_loads_nothing() -> None:
    assert ep.load_group("judgefuse.test_loader_nobody_declares_this") == []


def test_the_plugins_command_covers_every_group_once() -> None:
    from judgefuse.plugins_command import EXTENSION_POINTS, registered

    assert tuple(group for _title, group, _origins in EXTENSION_POINTS) == ep.GROUPS
    document = registered()
    assert document["judgefuse.judge_backends"]["direct"] == ep.BUILTIN
    assert document["judgefuse.storage"]["sqlite"] == ep.BUILTIN
    assert set(document["judgefuse.metrics"]) >= {"ece", "th_score"}
