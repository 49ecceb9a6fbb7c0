"""A plugin distribution outside judgefuse/ extends all four extension points.

``jf_example_plugin/`` is installed as a throwaway distribution (see conftest.py) and judgefuse
runs in subprocesses that see it: ``judgefuse plugins`` lists it, a panel judges through its
backend, ``judgefuse eval --methods`` runs its fusion method, its metric appears in the JSON, HTML
and terminal reports and in ``/v1/calibration``, and its storage scheme passes the storage
contract suite. Expected numbers are recomputed here with plain Python from the raw files.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PLUGIN_NAMES = ("jfx-canned", "jfx_median_p", "jfx_confident_errors", "jfxsqlite", "jf_example_plugin",
                "jf-example-plugin")
DIST = "jf-example-plugin 0.1.0"
TOE_SUFFIX = ".calibration.jsonl"


def test_plugins_command_lists_each_extension_with_its_distribution(run_with_plugin) -> None:
    proc = run_with_plugin(["-m", "judgefuse.cli", "plugins", "--json"])
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    expected = {
        "judgefuse.judge_backends": ("jfx-canned", "direct"),
        "judgefuse.fusion_methods": ("jfx_median_p", "majority"),
        "judgefuse.metrics": ("jfx_confident_errors", "ece"),
        "judgefuse.storage": ("jfxsqlite", "sqlite"),
    }
    for group, (plugin, builtin) in expected.items():
        assert listed[group][plugin] == f"{DIST} ({group}: {plugin} = jf_example_plugin.{_module(group)})"
        assert listed[group][builtin] == "built-in"
    assert listed["failed"] == []
    text = run_with_plugin(["-m", "judgefuse.cli", "plugins"])
    assert text.returncode == 0 and re.search(r"jfx_median_p\s+jf-example-plugin 0\.1\.0", text.stdout)


def _module(group: str) -> str:
    return {"judgefuse.judge_backends": "backend", "judgefuse.fusion_methods": "fusion",
            "judgefuse.metrics": "metric", "judgefuse.storage": "storage"}[group]


def test_broken_plugins_are_reported_never_raised(plugin_site: Path, tmp_path: Path, install_plugin,
                                                  run_with_sites) -> None:
    """A plugin that fails to import and one whose name is taken: both listed with their error,
    exit status 1; every other plugin and built-in still loads and eval still runs."""
    source = tmp_path / "broken_src"
    (source / "src" / "jfx_broken").mkdir(parents=True)
    (source / "src" / "jfx_broken" / "__init__.py").write_text("", encoding="utf-8")
    (source / "src" / "jfx_broken" / "taken.py").write_text(
        "from judgefuse.fusion.registry import fusion_method\n\n@fusion_method('majority')\ndef again():\n    pass\n",
        encoding="utf-8")
    (source / "pyproject.toml").write_text(
        '[project]\nname = "jfx-broken"\nversion = "0.0.1"\n'
        '[project.entry-points."judgefuse.fusion_methods"]\n'
        'missing = "jfx_broken.not_there"\ntaken = "jfx_broken.taken"\n', encoding="utf-8")
    broken_site = install_plugin(source, tmp_path / "broken_site")
    proc = run_with_sites(["-m", "judgefuse.cli", "plugins", "--json"], plugin_site, broken_site)
    assert proc.returncode == 1, proc.stderr
    listed = json.loads(proc.stdout)
    failed = {load["name"]: load for load in listed["failed"]}
    assert set(failed) == {"missing", "taken"}
    assert failed["missing"]["distribution"] == "jfx-broken 0.0.1"
    assert failed["missing"]["error"].startswith("ModuleNotFoundError: No module named 'jfx_broken.not_there'")
    assert failed["taken"]["error"].startswith("DuplicateFusionMethod: fusion method 'majority' is already registered")
    assert listed["judgefuse.fusion_methods"]["majority"] == "built-in"
    assert listed["judgefuse.fusion_methods"]["jfx_median_p"].startswith(DIST)
    assert "jfx-broken" in proc.stderr  # the warning names the distribution


def test_a_panel_judges_through_the_plugin_backend(run_with_plugin, tmp_path: Path) -> None:
    panel = tmp_path / "panel.yaml"
    panel.write_text("name: canned\nfusion: jfx_median_p\njudges:\n"
                     "  - {name: c95, model: canned/95, backend: jfx-canned}\n"
                     "  - {name: c60, model: canned/60, backend: jfx-canned}\n", encoding="utf-8")
    out = tmp_path / "votes.jsonl"
    proc = run_with_plugin(["-m", "judgefuse.cli", "judge", "--panel", str(panel), "--question", "2+2?",
                            "--answer-a", "4", "--answer-b", "5", "--label", "A", "--out", str(out), "--quiet"])
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    votes = {vote["judge"]: vote for vote in record["votes"]}
    assert votes["c95"]["choice"] == "A" and votes["c95"]["confidence"] == 0.95
    assert votes["c60"]["choice"] == "A" and votes["c60"]["confidence"] == 0.6

    # a backend nobody registered is refused by the panel schema, naming the field
    bad = tmp_path / "bad.yaml"
    bad.write_text("judges:\n  - {name: x, model: m, backend: jfx-nowhere}\n", encoding="utf-8")
    refused = run_with_plugin(["-m", "judgefuse.cli", "judge", "--panel", str(bad), "--question", "q",
                               "--answer-a", "a", "--answer-b", "b", "--quiet"])
    assert refused.returncode == 2
    assert "judges[0].backend" in refused.stderr and "jfx-nowhere" in refused.stderr
    assert "jfx-canned" in refused.stderr  # the known backends are listed, the plugin's included


def _toe(path: Path) -> list[tuple[float, str]]:
    """(P(A), human label) per line of a Trust-or-Escalate file, plain Python."""
    rows = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if text.strip():
            record = json.loads(text)
            p1, p2 = record["probs"]
            rows.append((p1 / (p1 + p2), "A" if record["preferences"]["human"] == 1 else "B"))
    return rows


def _confident_errors(pairs: list[tuple[float, bool]]) -> float:
    return sum(1 for c, right in pairs if c >= 0.9 and not right) / len(pairs)


def test_eval_runs_the_plugin_method_and_reports_the_plugin_metric(run_with_plugin, shared_data: Path,
                                                                   tmp_path: Path) -> None:
    toe = shared_data / "trust_or_escalate"
    out, html = tmp_path / "report.json", tmp_path / "report.html"
    proc = run_with_plugin(["-m", "judgefuse.cli", "eval", str(toe), "--methods", "jfx_median_p", "majority",
                            "--bootstrap", "30", "--json", str(out), "--html", str(html)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(out.read_text(encoding="utf-8"))["rows"]}
    assert set(rows) >= {"jfx_median_p", "majority"}

    files = sorted(toe.glob(f"*{TOE_SUFFIX}"))
    per_judge = {f.name[: -len(TOE_SUFFIX)]: _toe(f) for f in files}
    for name, items in per_judge.items():
        pairs = [(max(p, 1 - p), ("A" if p > 0.5 else "B") == label) for p, label in items]
        assert rows[name]["jfx_confident_errors"] == _confident_errors(pairs), name
    fused = []
    for votes in zip(*per_judge.values(), strict=True):
        assert len({label for _p, label in votes}) == 1  # the files list the same pairs in order
        median = statistics.median(p for p, _label in votes)
        fused.append((max(median, 1 - median), ("A" if median >= 0.5 else "B") == votes[0][1]))
    row = rows["jfx_median_p"]
    assert row["kind"] == "fusion" and row["n"] == len(fused) == 500
    assert row["accuracy"] == sum(right for _c, right in fused) / len(fused)
    assert row["jfx_confident_errors"] == _confident_errors(fused)
    low, high = row["ci95"]["jfx_confident_errors"]  # declared interval=True
    assert low <= row["jfx_confident_errors"] <= high and high > low
    print("jfx_median_p: accuracy", round(row["accuracy"], 4), "confident errors", row["jfx_confident_errors"])

    page = html.read_text(encoding="utf-8")
    assert "ConfErr %" in page and "<td>jfx_median_p</td>" in page
    assert "ConfErr%" in proc.stdout  # the terminal's second table
    expected_cell = f"{100 * row['jfx_confident_errors']:.1f}"
    assert re.search(rf"jfx_median_p.*\b{re.escape(expected_cell)}\b", proc.stdout), proc.stdout


def test_service_fuses_stores_and_reports_through_the_plugin(run_with_plugin, tmp_path: Path) -> None:
    proc = run_with_plugin([str(Path(__file__).with_name("service_with_plugin.py")), str(tmp_path)])
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    for verdict in result["verdicts"]:
        assert verdict["method"] == "jfx_median_p"
        assert verdict["choice"] == "A" and verdict["confidence"] == 0.95  # median of 0.95, 0.95, 0.60
    assert (tmp_path / "db" / "judgefuse.db").is_file()  # stored through jfxsqlite://
    keys = {entry["key"]: entry["all_time"] for entry in result["calibration"]["keys"]}
    # two of the four labels are B: every A at 0.95 is then a confident error, none at 0.60
    assert keys["method:jfx_median_p:fused"]["jfx_confident_errors"] == 0.5
    assert keys["judge:sure1:sc"]["jfx_confident_errors"] == 0.5
    assert keys["judge:unsure:sc"]["jfx_confident_errors"] == 0.0
    assert keys["mode:all:sc"]["jfx_confident_errors"] == 4 / 12


def test_storage_contract_suite_runs_on_the_plugin_scheme(run_with_plugin) -> None:
    proc = run_with_plugin(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/service/storage/test_storage.py",
                            "-k", "jfxsqlite", "-rA"], timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    passed = re.findall(r"PASSED tests/service/storage/test_storage\.py::\S+\[jfxsqlite\]", proc.stdout)
    assert len(passed) >= 15, proc.stdout[-3000:]
    print(f"storage contract on jfxsqlite://: {len(passed)} passed")


def test_no_file_in_judgefuse_names_the_plugin() -> None:
    found = []
    for path in (REPO / "judgefuse").rglob("*"):
        if path.is_file() and path.suffix in (".py", ".j2", ".yaml", ".html", ".toml", ".md"):
            text = path.read_text(encoding="utf-8", errors="replace")
            found += [f"{path}: {name}" for name in PLUGIN_NAMES if name in text]
    assert found == []
