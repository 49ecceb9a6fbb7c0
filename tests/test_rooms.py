"""Clean rooms: no module of ``judgefuse`` imports another module's private (``_``) names.

A name shared across modules is public (no underscore); a private one may change without
notice, so importing it ties two modules together behind their backs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "judgefuse"


def _private_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        ours = node.level > 0 or (node.module or "").split(".")[0] == "judgefuse"
        for alias in node.names:
            if ours and alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {alias.name}")
    return found


def test_no_private_names_imported_across_modules() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _private_imports(path)]
    assert not found, "private names imported from other modules:\n" + "\n".join(found)


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from judgefuse.x import public, _private\nfrom .y import (\n    _other,\n)\n")
    hits = _private_imports(sample, root=tmp_path)
    assert [hit.split(": ")[1] for hit in hits] == ["_private", "_other"]


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports, anywhere in the file (inside functions
    and ``if TYPE_CHECKING:`` too: a deferred import still ties the two modules together)."""
    root = package.parent
    paths = {_module_name(path, root): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in paths)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)] + ([node.module] if node.module else [])
                    source = ".".join(base)
                else:
                    source = node.module or ""
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in paths:
                        graph[name].add(submodule)
                    elif source in paths:
                        graph[name].add(source)
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circles_in_the_package() -> None:
    """Imports run one way in every room, the service's slices included: a registry names its
    built-in modules by path instead of importing them back, and a slice takes what it needs
    from the gateway as a small protocol (service/kernel/serving.py) instead of importing it."""
    circles = import_circles(import_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(circle) for circle in circles)


def test_the_circle_check_sees_a_deferred_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("def thing():\n    from . import a\n")
    (package / "c.py").write_text("from pkg import a\n")
    assert import_circles(import_graph(package)) == [["pkg.a", "pkg.b"]]


def folder_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The module graph lifted to the folders of ``package``: each subpackage of it is one node,
    as is each of its top-level modules; an edge is any import from a module of one node into a
    module of another. Modules outside ``package`` are left out."""
    depth = package.count(".") + 2

    def folder(module: str) -> str | None:
        if module != package and not module.startswith(package + "."):
            return None
        return ".".join(module.split(".")[:depth])

    lifted: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = folder(module)
        if here is None:
            continue
        lifted.setdefault(here, set())
        for target in targets:
            there = folder(target)
            if there is not None and there != here:
                lifted[here].add(there)
                lifted.setdefault(there, set())
    return lifted


def test_no_import_circles_between_the_service_folders() -> None:
    """Folder to folder, the service runs one way (docs/design.md, 'Architecture'): its slices,
    kernel, edge, base and commands form no strongly connected component of more than one
    folder. import-linter's layers contract over the same folders (pyproject.toml) fixes their
    order; this check needs no order and sees deferred imports too."""
    folders = folder_graph(import_graph(), "judgefuse.service")
    assert len(folders) > 10, sorted(folders)  # the lift did find the folders
    circles = import_circles(folders)
    assert not circles, "folder circles:\n" + "\n".join(" <-> ".join(circle) for circle in circles)


def test_the_folder_check_sees_a_circle_through_two_modules(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    for folder in ("low", "high"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "high" / "route.py").write_text("from pkg.low.base import thing\n")
    (root / "low" / "base.py").write_text("thing = 1\n")
    (root / "low" / "helper.py").write_text("def late():\n    from pkg.high import route\n")
    (root / "top.py").write_text("from pkg.high import route\n")
    graph = import_graph(root)
    assert import_circles(graph) == []  # no module circle ...
    lifted = folder_graph(graph, "pkg")
    assert lifted["pkg.top"] == {"pkg.high"}
    assert import_circles(lifted) == [["pkg.high", "pkg.low"]]  # ... but a folder circle
