"""The annotator page's Markdown (review/rendering.py): code blocks and math kept, untrusted
HTML and script never interpreted, links limited to http(s)/mailto."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from judgefuse.service.review.rendering import render_text


def test_code_blocks_keep_their_lines_and_escape_markup() -> None:
    html = render_text("Try:\n\n```python\ndef f(x):\n    return x < 2 and '<b>'\n```\n")
    assert '<pre><code class="language-python">def f(x):\n    return x &lt; 2' in html
    assert "<b>" not in html


def test_math_stays_tex_in_a_styled_span_and_money_stays_text() -> None:
    html = render_text("Energy $E = m c^2$, \\(a_1\\) and $5 or $6.\n\n$$\n\\sum_i a_i * b_i\n$$\n")
    assert '<span class="math">E = m c^2</span>' in html
    assert '<span class="math">a_1</span>' in html
    assert "$5 or $6." in html  # no math: a number follows the closing dollar
    assert '<div class="math">\\sum_i a_i * b_i</div>' in html  # * not taken for emphasis


@pytest.mark.parametrize("payload", [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[click](javascript:alert(1))",
    '<div class="math" onclick="alert(1)">m</div>',
    "$<script>alert(1)</script>$",
])
def test_untrusted_html_never_becomes_markup(payload: str) -> None:
    elements: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            elements.append((tag, attrs))

    html = render_text(f"before {payload} after")
    Collect().feed(html)
    tags = {tag for tag, _ in elements}
    attrs = [(name, value or "") for _, pairs in elements for name, value in pairs]
    assert tags <= {"p", "span", "div", "a"}, html
    assert not [name for name, _ in attrs if name.startswith("on")], html
    assert not [v for name, v in attrs if name == "href" and not v.startswith("https:")], html
    assert "alert(1)" in html  # shown as text, not dropped


def test_links_get_rel_and_tables_keep_only_alignment() -> None:
    html = render_text("[docs](https://example.org)\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n")
    assert '<a href="https://example.org" rel="noopener noreferrer">docs</a>' in html
    assert '<td style="text-align:right">2</td>' in html
    assert render_text(None) == "" and render_text("") == ""
