"""One spelling of the label kinds: ``judgefuse/judges/types.py`` defines them (``Letter`` and
``LETTERS``: the decided kinds; ``TieLabel`` and ``TIE_LABELS``: the undecided ones; ``LabelKind``
and ``LABEL_KINDS``: all four) and every other module of the judges and the service imports them.
A set of them written out again (a tuple, list or set of the words, or a ``Literal`` of them) is
a second definition that the next label kind would miss, so this test finds and names it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from judgefuse.judges.types import LABEL_KINDS, LETTERS, TIE_LABELS

PACKAGE = Path(__file__).resolve().parents[1] / "judgefuse"
DEFINITION = PACKAGE / "judges" / "types.py"
SCOPE = [PACKAGE / "judges", PACKAGE / "service"]
WORDS = frozenset(LABEL_KINDS)


def _spelled_sets(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """Places in ``path`` that write out two or more label kinds and nothing else."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Tuple | ast.List | ast.Set):  # Literal["A", "B"]'s slice is a tuple
            continue
        elements = node.elts
        words = [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(words) >= 2 and len(words) == len(elements) and set(words) <= WORDS:
            found.append(f"{path.relative_to(root)}:{node.lineno}: {', '.join(words)}")
    return found


def test_the_label_kinds_are_spelled_once() -> None:
    paths = sorted(p for folder in SCOPE for p in folder.rglob("*.py") if p != DEFINITION)
    found = [hit for path in paths for hit in _spelled_sets(path)]
    templates = sorted((PACKAGE / "service" / "templates").rglob("*.j2"))
    pattern = re.compile(r"""\(\s*(["'])(?:A|B|tie|both_bad)\1\s*,\s*(["'])(?:A|B|tie|both_bad)\2""")
    found += [
        f"{t.relative_to(PACKAGE.parent)}: {m.group(0)}"
        for t in templates
        for m in pattern.finditer(t.read_text(encoding="utf-8"))
    ]
    assert not found, "label kinds written out again (import them from judgefuse.judges.types):\n" + "\n".join(found)


def test_the_definition_is_the_decided_and_the_undecided_kinds() -> None:
    assert LETTERS == ("A", "B")
    assert TIE_LABELS == ("tie", "both_bad")
    assert LABEL_KINDS == LETTERS + TIE_LABELS


def test_the_review_page_offers_every_label_kind_in_order() -> None:
    """The page's buttons are markup, one per kind: they must be the kinds, in their order."""
    page = (PACKAGE / "service" / "templates" / "review.html.j2").read_text(encoding="utf-8")
    assert tuple(re.findall(r'name="label" value="([^"]+)"', page)) == LABEL_KINDS


def test_the_check_sees_a_tuple_and_a_literal(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        'from typing import Literal\nKinds = Literal["tie", "both_bad"]\nif x in ("A", "B"):\n    pass\n'
        'ANSWERS = ("A", "B", "tie", "none")\nONE = ("A",)\n'
    )
    hits = _spelled_sets(sample, root=tmp_path)
    assert [hit.split(": ")[1] for hit in hits] == ["tie, both_bad", "A, B"]
