"""The shell lines of the integration pages (docs/integrations/*.md; issue 47, item 5).

Their Python examples and the promptfoo config run in ``tests/docs/test_doc_examples.py``
against a gateway with stub judges. What is left are the ``sh`` lines, read from the Markdown:

* ``pip install 'judgefuse[EXTRA]'`` needs the registry, so it is not run. It is checked
  offline instead: pip only warns about an extra the package does not declare and exits 0,
  so the test checks that the installed judgefuse declares ``EXTRA``, and that the extra
  requires every third-party package the page's Python example imports.
* Any other line is in ``SKIPPED``, with the reason. A line the pages gain that is neither
  checked nor skipped fails the test.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from jf_test_support.markdown import fenced

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "integrations").glob("*.md"))


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


PIP_INSTALL = re.compile(r"^pip install 'judgefuse\[([\w,-]+)\]'$")

SKIPPED = {
    "PROMPTFOO_PYTHON=.venv/bin/python JUDGEFUSE_URL=http://localhost:8000 npx promptfoo eval -c promptfooconfig.yaml": "npx fetches promptfoo from npm and the config's provider (openai:gpt-4o-mini) calls OpenAI "
    "with a key; test_doc_examples.py runs the page's config in the installed promptfoo CLI "
    "with --providers echo against a gateway with stub judges",
}


def sh_lines(page: Path) -> list[str]:
    return [
        line.strip()
        for _heading, language, code in fenced(page)
        if language == "sh"
        for line in code.splitlines()
        if line.strip()
    ]


def imported_packages(page: Path) -> set[str]:
    """The distributions that provide what the page's Python blocks import, judgefuse and the
    standard library left out."""
    modules: set[str] = set()
    for _heading, language, code in fenced(page):
        if language != "python":
            continue
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    modules -= {"judgefuse", *sys.stdlib_module_names}
    providers = importlib.metadata.packages_distributions()
    return {canonical(dist) for module in modules for dist in providers[module]}


def declared_extras() -> dict[str, set[str]]:
    """Extra -> the distributions the installed judgefuse requires for it."""
    extras: dict[str, set[str]] = defaultdict(set)
    for spec in importlib.metadata.requires("judgefuse") or []:
        marker = re.search(r'extra == "([\w-]+)"', spec)
        if marker:
            extras[marker.group(1)].add(canonical(re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0]))
    return extras


def test_every_shell_line_of_the_integration_pages_is_checked_or_skipped() -> None:
    lines = [line for page in PAGES for line in sh_lines(page)]
    installs = [line for line in lines if PIP_INSTALL.match(line)]
    assert len(installs) >= 2, "the pages' install lines were not found"
    assert set(lines) - set(installs) == set(SKIPPED)


@pytest.mark.parametrize(
    "page", [page for page in PAGES if any(map(PIP_INSTALL.match, sh_lines(page)))], ids=lambda page: page.stem
)
def test_the_install_line_names_an_extra_that_installs_what_the_example_imports(page: Path) -> None:
    extras = declared_extras()
    named = [
        extra for line in sh_lines(page) if (found := PIP_INSTALL.match(line)) for extra in found.group(1).split(",")
    ]
    assert named and set(named) <= set(extras), (
        f"{page.name}: pip install names {named}, judgefuse declares {sorted(extras)}"
    )
    needed = imported_packages(page)
    assert needed, f"{page.name}: the example imports no third-party package"
    installed = set().union(*(extras[extra] for extra in named))
    assert needed <= installed, f"{page.name}: the example imports {sorted(needed - installed)}, not in {named}"
