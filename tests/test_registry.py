"""The shared registry type: name rules, duplicates, origins, lazy built-ins and plugins.

Each test builds its own :class:`Registry` (and its own module names and entry-point group),
so nothing it registers reaches judgefuse's registries.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from judgefuse import entry_points as ep
from judgefuse.errors import InputError, JudgefuseError
from judgefuse.registry import DuplicateEntry, Registry, UnknownEntry, identifier_name

REPO = Path(__file__).resolve().parents[1]


def alpha() -> str:
    return "alpha"


def beta() -> str:
    return "beta"


class DuplicateThing(DuplicateEntry):
    pass


class UnknownThing(UnknownEntry):
    pass


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module the test's built-in and plugin modules import the registry from (the test
    sets its ``REGISTRY``), on ``sys.path`` with the test's other modules."""
    name = f"jfx_registry_home_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text("REGISTRY = None\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _serve(home: str, registry: Registry[object], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__import__(home), "REGISTRY", registry)


def _module(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    return name


# ---------------------------------------------------------------- names and duplicates


@pytest.mark.parametrize("bad", ["", " x", "x ", "   "])
def test_the_default_name_rule_refuses_empty_and_padded_names(bad: str) -> None:
    registry: Registry[object] = Registry("widget")
    with pytest.raises(ValueError, match="invalid widget name"):
        registry.check_name(bad)
    with pytest.raises(ValueError, match="invalid widget name"):
        registry.register(bad, alpha)
    assert registry.names() == []


def test_a_custom_name_rule_and_normalised_keys() -> None:
    registry: Registry[object] = Registry("scheme", name_rule=identifier_name("scheme"), normalise=str.lower)
    with pytest.raises(ValueError, match="scheme name must be an identifier, got 'a-b'"):
        registry.register("a-b", alpha)
    registry.register("Redis", alpha)
    assert registry.names() == ["redis"]
    assert registry.get("REDIS") is alpha and "rEdIs" in registry
    with pytest.raises(DuplicateEntry):
        registry.register("REDIS", beta)


def test_a_taken_name_is_refused_naming_both_sides_unless_replace() -> None:
    registry: Registry[object] = Registry("widget", duplicate=DuplicateThing)
    registry.register("one", alpha)
    with pytest.raises(DuplicateThing) as caught:
        registry.register("one", beta)
    message = str(caught.value)
    assert f"widget 'one' is already registered (by module {__name__})" in message
    assert f"refusing to replace it with {__name__}.beta" in message
    assert registry.get("one") is alpha  # the first registration stands
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, JudgefuseError)
    assert not isinstance(caught.value, InputError)  # a mistake of the code that registers
    registry.register("one", beta, replace=True)
    assert registry.get("one") is beta


def test_an_unknown_name_is_an_input_error_listing_the_known_names() -> None:
    registry: Registry[object] = Registry("widget", unknown=UnknownThing)
    registry.register("zeta", alpha)
    registry.register("eta", beta)
    assert registry.find("nope") is None and "nope" not in registry
    with pytest.raises(UnknownThing) as caught:
        registry.get("nope")
    assert str(caught.value) == "unknown widget 'nope'; known widgets: eta, zeta"
    assert isinstance(caught.value, InputError) and isinstance(caught.value, KeyError)
    ordered: Registry[object] = Registry("metric", order="registered")
    ordered.register("zeta", alpha)
    ordered.register("eta", beta)
    assert ordered.names() == ["zeta", "eta"] and ordered.entries() == [alpha, beta]
    with pytest.raises(UnknownEntry, match="known metrics: zeta, eta"):
        ordered.get("nope")


def test_unregister_removes_the_entry_and_its_origin() -> None:
    registry: Registry[object] = Registry("widget")
    registry.register("one", alpha)
    registry.unregister("one")
    registry.unregister("never-there")  # a no-op
    assert registry.names() == [] and registry.origins() == {}


# ---------------------------------------------------------------- origins


def test_origins_tell_built_in_from_a_direct_registration() -> None:
    registry: Registry[object] = Registry("widget")
    registry.register("mine", alpha)
    registry.register("ours", beta, module="judgefuse.fusion.voting")
    assert registry.origins() == {"mine": f"module {__name__}", "ours": ep.BUILTIN}


# ---------------------------------------------------------------- lazy built-ins


def test_built_in_modules_are_imported_on_the_first_lookup_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _home(tmp_path, monkeypatch)
    builtin = _module(tmp_path, f"jfx_registry_builtin_{tmp_path.name}", f"""\
        from {home} import REGISTRY

        IMPORTS = 1

        def one():
            return 1

        REGISTRY.register("one", one, module="judgefuse.example")
        REGISTRY.names()  # a lookup while the built-ins import does not recurse
    """)
    registry: Registry[object] = Registry("widget", builtins=(builtin,), order="registered")
    _serve(home, registry, monkeypatch)
    assert builtin not in sys.modules  # building the registry imported nothing
    assert registry.names() == ["one"]
    module = sys.modules[builtin]
    assert registry.origins() == {"one": ep.BUILTIN}
    module.IMPORTS = 2
    assert registry.get("one")() == 1 and sys.modules[builtin].IMPORTS == 2  # not imported again


def test_a_registration_from_outside_comes_after_the_built_ins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _home(tmp_path, monkeypatch)
    builtin = _module(tmp_path, f"jfx_registry_first_{tmp_path.name}", f"""\
        from {home} import REGISTRY

        def first():
            return 1

        REGISTRY.register("first", first, module="judgefuse.example")
    """)
    registry: Registry[object] = Registry("widget", builtins=(builtin,), order="registered")
    _serve(home, registry, monkeypatch)
    registry.register("mine", alpha)  # imports the built-ins before it registers
    assert registry.names() == ["first", "mine"]
    with pytest.raises(DuplicateEntry, match=r"'first' is already registered \(by built-in\)"):
        registry.register("first", beta)  # the outsider is refused, never the built-in


def test_a_built_in_module_that_fails_to_import_fails_every_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = _module(tmp_path, f"jfx_registry_broken_{tmp_path.name}", "raise RuntimeError('broken built-in')\n")
    registry: Registry[object] = Registry("widget", builtins=(broken,))
    for _ in range(2):  # not remembered as loaded: a broken install keeps saying so
        with pytest.raises(RuntimeError, match="broken built-in"):
            registry.names()


def test_the_judge_backend_table_imports_its_built_ins_on_first_use() -> None:
    """In a fresh interpreter: reading a panel config imports neither the built-in backends nor
    the transport (aiohttp); the first listing imports the built-ins."""
    code = textwrap.dedent("""\
        import sys
        import judgefuse.judges.config
        import judgefuse.judges.backends as backends
        assert "judgefuse.judges.builtin_backends" not in sys.modules
        assert "judgefuse.judges.transport" not in sys.modules
        assert {"direct", "litellm"} <= set(backends.available_backends())
        assert "judgefuse.judges.builtin_backends" in sys.modules
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# ---------------------------------------------------------------- plugins


def test_an_entry_point_plugin_is_loaded_after_the_built_ins_with_its_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = f"judgefuse.test_registry_{tmp_path.name}"
    home = _home(tmp_path, monkeypatch)
    builtin = _module(tmp_path, f"jfx_registry_core_{tmp_path.name}", f"""\
        from {home} import REGISTRY

        def core():
            return "core"

        REGISTRY.register("core", core, module="judgefuse.example")
    """)
    plugin = _module(tmp_path, f"jfx_registry_plugin_{tmp_path.name}", f"""\
        from {home} import REGISTRY

        def extra():
            return "extra"

        def again():
            return "again"

        REGISTRY.register("extra", extra)
        REGISTRY.register("core", again)  # taken: this plugin fails, the built-in stays
    """)
    info = tmp_path / "jfx_registry_test-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jfx-registry-test\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{group}]\nextra = {plugin}\n", encoding="utf-8")
    registry: Registry[object] = Registry("widget", group=group, builtins=(builtin,), order="registered")
    _serve(home, registry, monkeypatch)

    assert registry.names() == ["core", "extra"]
    assert registry.get("extra")() == "extra" and registry.get("core")() == "core"
    assert registry.origins() == {
        "core": ep.BUILTIN,
        "extra": f"jfx-registry-test 1.0 ({group}: extra = {plugin})",
    }
    (load,) = ep.load_group(group)
    assert load.error is not None and load.error.startswith("DuplicateEntry: widget 'core' is already registered")
