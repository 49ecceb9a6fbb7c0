"""Who may take the full ``Storage`` (issue 42: consumers typed against the narrow contract they use).

Every annotation in ``judgefuse/service`` outside ``storage/`` that names ``Storage`` (a
parameter, a return, an annotated name; quoted ones too) is listed by module and the function
or class it sits in. The list must equal :data:`COMPOSITION_ROOTS`: the app and the gateway,
which open and wire the store, and each slice's service object, which composes its slice and
hands the store on, one narrow contract per parameter
(:mod:`judgefuse.service.storage.contracts`). A new consumer typed ``Storage`` fails here:
type it against the contracts it uses instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[1] / "judgefuse" / "service"

COMPOSITION_ROOTS = {
    ("app.py", "_storage_for"),  # opens the configured store
    ("app.py", "create_app"),  # may be handed one (tests, embedding)
    ("gateway.py", "Gateway.__init__"),  # wires the slices
    ("judging/pipeline.py", "JudgePipeline.__init__"),
    ("review/labels.py", "LabelService.__init__"),
    ("review/queue.py", "ReviewQueue.__init__"),
    ("learning/service.py", "LearningService.__init__"),
    ("estimates/service.py", "CalibrationService.__init__"),
    ("monitoring/service.py", "MonitorService.__init__"),
}
"""(module under judgefuse/service, qualified name) of each annotation allowed to name ``Storage``."""


def _names_storage(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return any(
        (isinstance(node, ast.Name) and node.id == "Storage")
        or (isinstance(node, ast.Attribute) and node.attr == "Storage")
        or (isinstance(node, ast.Constant) and isinstance(node.value, str) and _names_storage(node))
        for node in ast.walk(annotation)
    )


def _annotations(tree: ast.AST, scope: str = "") -> Iterator[tuple[str, ast.expr | None]]:
    """(qualified name of the enclosing def or class, annotation) for each annotation in ``tree``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{scope}{node.name}"
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    yield name, arg.annotation
            yield name, node.returns
            yield from _annotations(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _annotations(node, f"{scope}{node.name}.")
        elif isinstance(node, ast.AnnAssign):
            yield scope.rstrip(".") or "<module>", node.annotation
        else:
            yield from _annotations(node, scope)


def storage_consumers(root: Path = SERVICE) -> set[tuple[str, str]]:
    """(module, qualified name) of every annotation naming ``Storage`` under ``root``, ``storage/`` left out."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if module.startswith("storage/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found |= {(module, name) for name, annotation in _annotations(tree) if _names_storage(annotation)}
    return found


def test_only_the_composition_roots_take_the_full_storage() -> None:
    found = storage_consumers()
    assert found == COMPOSITION_ROOTS, (
        f"typed against the full Storage, not a composition root: {sorted(found - COMPOSITION_ROOTS)}; "
        f"allowed but gone (drop from the list): {sorted(COMPOSITION_ROOTS - found)}"
    )


def test_a_planted_consumer_is_found(tmp_path: Path) -> None:
    (tmp_path / "storage").mkdir()
    (tmp_path / "storage" / "base.py").write_text("class Storage: ...\n")
    (tmp_path / "review").mkdir()
    (tmp_path / "review" / "planted.py").write_text(
        "from judgefuse.service import storage\n"
        "from judgefuse.service.storage import LabelLedger, Storage\n\n"
        "async def fine(labels: LabelLedger) -> None: ...\n\n"
        "class Reader:\n"
        "    store: 'Storage | None' = None\n\n"
        "    def __init__(self, storage: Storage) -> None: ...\n\n"
        "    def more(self, *, other: storage.Storage) -> list[Storage]: ...\n"
    )
    assert storage_consumers(tmp_path) == {
        ("review/planted.py", "Reader"),
        ("review/planted.py", "Reader.__init__"),
        ("review/planted.py", "Reader.more"),
    }
