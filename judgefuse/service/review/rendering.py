"""Question and answers on the annotator page, rendered as Markdown and sanitised.

JudgeBench and most pairwise sets are code and math; shown as one plain-text block they are
hard to compare (docs/design.md, 'The review loop'). So the page renders each text as
CommonMark with tables (markdown-it-py): fenced and indented code keep their lines in
``<pre><code>``, and math (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``) is kept as TeX text in a
``<span class="math">`` / ``<div class="math">`` that the page styles: nothing is typeset, no
script from anywhere is loaded.

The text is untrusted (it came in a judge request), so nothing in it may run: raw HTML in
the Markdown is not interpreted (markdown-it's ``html`` option off: a ``<script>`` arrives as
text), and the rendered HTML then passes nh3 (ammonia) with an allow-list of formatting tags,
``http``/``https``/``mailto`` links only (``rel="noopener noreferrer"``), no images, no
styles, no event attributes. The page's Content-Security-Policy is the third line.
"""

from __future__ import annotations

import re
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markupsafe import Markup

__all__ = ["render_text"]

_TAGS = {
    "p", "br", "hr", "pre", "code", "em", "strong", "del", "s", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a", "span",
    "div",
}
_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},  # language-xxx from a fenced block's info string
    "span": {"class"},
    "div": {"class"},
    "th": {"style"}, "td": {"style"},  # table alignment (text-align only, see below)
    "ol": {"start"},
}
_CLASS = {"code": re.compile(r"language-[\w+#.-]{1,40}"), "span": re.compile("math"),
          "div": re.compile("math")}
_INLINE_OPEN = (("$$", "$$"), ("\\(", "\\)"), ("$", "$"))
_DIGIT_AFTER = re.compile(r"\d")


def _math_inline(state: StateInline, silent: bool) -> bool:
    """``$x$``, ``$$x$$`` or ``\\(x\\)`` inside a paragraph: a math span holding the TeX text.
    A ``$`` followed by a space or closed before a digit (``$5 and $6``) is money, not math."""
    src, pos = state.src, state.pos
    for opener, closer in _INLINE_OPEN:
        if not src.startswith(opener, pos):
            continue
        start = pos + len(opener)
        end = src.find(closer, start)
        while end != -1 and src[end - 1] == "\\":
            end = src.find(closer, end + 1)
        if end == -1 or end == start:
            return False
        if opener == "$" and (src[start].isspace() or src[end - 1].isspace()
                              or _DIGIT_AFTER.match(src, end + 1)):
            return False
        if not silent:
            token = state.push("math_inline", "span", 0)
            token.content = src[start:end]
            token.markup = opener
        state.pos = end + len(closer)
        return True
    return False


def _math_block(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """A ``$$`` or ``\\[`` line opening display math, up to the line that closes it."""
    begin = state.bMarks[start_line] + state.tShift[start_line]
    first = state.src[begin:state.eMarks[start_line]].strip()
    for opener, closer in (("$$", "$$"), ("\\[", "\\]")):
        if not first.startswith(opener):
            continue
        rest = first[len(opener):]
        lines, line = [], start_line
        if rest.endswith(closer) and len(rest) >= len(closer):
            lines.append(rest[: -len(closer)])
        else:
            lines.append(rest)
            line += 1
            while line < end_line:
                text = state.src[state.bMarks[line] + state.tShift[line]:state.eMarks[line]]
                if text.rstrip().endswith(closer):
                    lines.append(text.rstrip()[: -len(closer)])
                    break
                lines.append(text)
                line += 1
            else:
                return False
        if silent:
            return True
        token = state.push("math_block", "div", 0)
        token.content = "\n".join(lines).strip()
        token.map = [start_line, line + 1]
        state.line = line + 1
        return True
    return False


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table").enable("strikethrough")
    md.inline.ruler.before("escape", "math_inline", _math_inline)
    md.block.ruler.before("fence", "math_block", _math_block,
                          {"alt": ["paragraph", "reference", "blockquote", "list"]})

    def inline(self: object, tokens: list, idx: int, options: object, env: object) -> str:
        return f'<span class="math">{_escape(tokens[idx].content)}</span>'

    def block(self: object, tokens: list, idx: int, options: object, env: object) -> str:
        return f'<div class="math">{_escape(tokens[idx].content)}</div>\n'

    md.add_render_rule("math_inline", inline)
    md.add_render_rule("math_block", block)
    return md


def _escape(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    """Keep a table cell's ``text-align`` (what markdown-it writes), a code block's
    ``language-...`` class and the ``math`` class; drop any other style or class."""
    if attribute == "style":
        return value if re.fullmatch(r"text-align:(left|right|center)", value) else None
    if attribute == "class":
        allowed = _CLASS.get(tag)
        return value if allowed is not None and allowed.fullmatch(value) else None
    return value


def render_text(text: str | None) -> Markup:
    """``text`` as sanitised HTML, safe to put into the page unescaped."""
    if not text:
        return Markup("")
    html = _markdown().render(text)
    clean = nh3.clean(
        html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer", attribute_filter=_attribute_filter, strip_comments=True,
    )
    return Markup(clean)  # noqa: S704 - nh3 has sanitised it: the point of this module
