"""Defuse our block tags inside untrusted text, however they are disguised.

The prompts put untrusted text (the question, both answers, the judges' explanations) between
tags (``<output_a_…>`` … ``</output_a_…>``). Text that could pass for one of those tags must not
survive inside the data, or a hostile answer could close its block early and speak as the
prompt. Plain ``</output_a>`` is easy; the disguises a model still reads as the tag are not:

* zero-width and format characters inside it (``<\\u200b/output_a>``, ``</out\\u200bput_a>``):
  Unicode category ``Cf``, combining marks (``Mn``/``Me``) and the other default-ignorable code
  points are ignored;
* compatibility forms (fullwidth ``＜／ｏｕｔｐｕｔ＿ａ＞``, small forms, mathematical letters):
  each character is read in NFKD, with its combining marks dropped and its case folded;
* letters from other scripts that look Latin (Cyrillic ``о``/``р``/``а``, Greek ``ο``/``ι``, ...),
  digits that look like letters (``0``/``1``), hyphens for the underscore: mapped by
  :data:`_LOOKALIKES`;
* brackets and slashes that look like ``<`` and ``/`` (``〈 ⟨ ‹ « ⟪ ❮ ≮ ≤``, ``⁄ ∕ ⧸ ╱ \\``).

How: :func:`skeleton` maps a character to what it reads as. Wherever a character that reads
as ``<`` (:data:`OPENERS`) is followed, in skeleton, by optional whitespace, an optional ``/``,
optional whitespace and one of :data:`BLOCK_TAGS` (not followed by a letter or digit), that
opening character is replaced by ``&lt;`` (:data:`DEFUSED_OPENER`): plain ASCII, read as an
escaped bracket, and not itself a bracket lookalike (the old replacement ``‹`` is one).

The text is *not* rewritten in NFKC or stripped of invisible characters: that would change
what the judges are judging (``x²`` would become ``x2``; a question about zero-width
characters would lose them). Only the opening character of a would-be tag changes. The
skeleton is computed lazily from each candidate opener onward, so ordinary text costs one
regex scan, and hostile text a bounded look-ahead per opener (linear overall).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

__all__ = ["BLOCK_TAGS", "DEFUSED_OPENER", "OPENERS", "neutralise_tags", "skeleton"]

BLOCK_TAGS: tuple[str, ...] = ("instruction", "output_a", "output_b", "judgment")
"""The tags that delimit untrusted text in the rendered prompts (before their per-prompt nonce)."""

DEFUSED_OPENER = "&lt;"
"""What replaces the opening bracket of a would-be block tag inside untrusted text."""

_OPENER_CHARS = (
    "<\uff1c\ufe64"  # < and its compatibility forms (fullwidth, small)
    "\u2039\u00ab"  # ‹ «
    "\u2329\u3008\u27e8\u27ea\u27ec\u300a"  # 〈 〈 ⟨ ⟪ ⟬ 《
    "\u276c\u276e\u2770\u29fc\u2989\u2991\u2993\u2995"  # ❬ ❮ ❰ ⧼ ⦉ ⦑ ⦓ ⦕
    "\u02c2\u1438\u22b2\u25c1\u25c5\u22d6\u227a\u226e"  # ˂ ᐸ ⊲ ◁ ◅ ⋖ ≺ ≮
    "\u2264\u2a7d\u2266\u2270"  # ≤ ⩽ ≦ ≰
    "\u2280\u22ea\ufe3d\ufe3f"  # ⊀ ⋪ and the vertical presentation forms of 《 〈 (their NFKD)
)
_SLASH_CHARS = "/\\\uff0f\uff3c\ufe68\u2044\u2215\u29f8\u29f5\u2571\u27cb\u3033\u30ce\u2f03\u4e3f"
_UNDERSCORE_CHARS = "_\uff3f\ufe33\ufe34\ufe4d\ufe4e\ufe4f\u2017\u02cd-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d"

_LETTERS: dict[str, str] = {
    "a": "\u0430\u0251\u03b1\u237a",
    "b": "\u044c\u0185\u15af\u13cf",
    "c": "\u0441\u03f2\u1d04\u217d\u2ca5",
    "d": "\u0501\u217e\u13e7",
    "e": "\u0435\u04bd\u212e\u1971\u0454",
    "g": "\u0261\u0581\u018d",
    "i": "\u0456\u0131\u03b9\u0269\u04cf\u2170\ua647l1|\u01c0\u13a5\u2373",
    "j": "\u0458\u03f3\u029d",
    "m": "\u043c\u217f\u1d0d",
    "n": "\u0578\u0274\u043f",
    "o": "\u043e\u03bf\u0585\u1d0f\u03c3\u0665\u06f5\u0966\u09e60\u0c66\u0ce6\u0d66\u0e50\u0ed0\u1040\u2c9f",
    "p": "\u0440\u03c1\u2374\u1d18\u03f1\u2ca3",
    "r": "\u0433\u1d26\u2c85\uab47",
    "s": "\u0455\ua731\u01bd",
    "t": "\u0442\u1d1b\u03c4",
    "u": "\u03c5\u057d\u1d1c\u028b\ua79f",
}

_LOOKALIKES: dict[str, str] = {
    **{char: "<" for char in _OPENER_CHARS},
    **{char: "/" for char in _SLASH_CHARS},
    **{char: "_" for char in _UNDERSCORE_CHARS},
    **{char: letter for letter, chars in _LETTERS.items() for char in chars},
}
"""Characters read as an ASCII character of our tags (applied after NFKD and case folding)."""

_DROP_CATEGORIES = frozenset({"Cf", "Mn", "Me", "Cc"})
_IGNORABLE_RANGES = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0xE0000, 0xE0FFF),
)  # fmt: skip
"""Default-ignorable code points outside the dropped categories (Unicode DerivedCoreProperties)."""

OPENERS = frozenset(_OPENER_CHARS)
"""Every character whose skeleton begins with ``<`` (a test checks this over all of Unicode)."""

_AFTER_OPENER = re.compile(r"\s*/?\s*(?:" + "|".join(BLOCK_TAGS) + r")(?![a-z0-9])")
_NAME_CHAR = re.compile(r"[a-z0-9]")
_TAG_INITIALS = frozenset(tag[0] for tag in BLOCK_TAGS)


def _ignorable(code: int) -> bool:
    return any(low <= code <= high for low, high in _IGNORABLE_RANGES)


@lru_cache(maxsize=8192)
def _char_skeleton(char: str) -> str:
    mapped = _LOOKALIKES.get(char)
    if mapped is not None:
        return mapped
    if unicodedata.category(char) in _DROP_CATEGORIES or _ignorable(ord(char)):
        return "" if char not in "\t\n\r" else " "
    out = []
    for part in unicodedata.normalize("NFKD", char):
        if unicodedata.category(part) in _DROP_CATEGORIES:
            continue
        for folded in part.casefold():
            out.append(_LOOKALIKES.get(folded, folded))
    return "".join(out)


def _ascii_class(keep: Callable[[str], bool]) -> str:
    return "[" + re.escape("".join(char for char in map(chr, range(128)) if keep(char))) + "]"


_SKIPPED = _ascii_class(lambda char: _char_skeleton(char).strip() == "")
_CONTINUES = _ascii_class(lambda char: _char_skeleton(char)[:1] in ("/", *_TAG_INITIALS))
_CANDIDATE_RE = re.compile(
    "[" + re.escape(_OPENER_CHARS) + "]" + rf"(?={_SKIPPED}*(?:[^\x00-\x7f]|{_CONTINUES}|\Z))"
)
"""An opener whose next characters could continue a tag. ASCII text such as ``a < b`` or
``<div>`` is rejected here, inside the regex engine; only the rest gets the look-ahead."""


def skeleton(text: str) -> str:
    """What ``text`` reads as, for tag matching: ignorables dropped, NFKD, case-folded, lookalikes mapped."""
    return "".join(_char_skeleton(char) for char in text)


def _verdict(read: str) -> bool | None:
    """Whether skeleton ``read`` (what follows an opener so far) is ``/?tag``: None while undecided."""
    rest = read.lstrip()
    if rest.startswith("/"):
        rest = rest[1:].lstrip()
    if not rest:
        return None
    if rest[0] not in _TAG_INITIALS:  # the common case: "a < b", "<div>"
        return False
    for tag in BLOCK_TAGS:
        if len(rest) <= len(tag):
            if tag.startswith(rest):
                return None  # still spelling a tag
        elif rest.startswith(tag):
            return not _NAME_CHAR.match(rest, len(tag))
    return False


def _tag_follows(text: str, start: int) -> bool:
    """Whether the text after an opener at ``start - 1`` reads as ``/?tag`` (module docstring).

    Reads one character at a time and stops as soon as the answer is known (usually after one
    or two characters), so the look-ahead of every opener ends at the next character that
    cannot continue a tag: the whole scan stays linear in the text.
    """
    read = ""
    for index in range(start, len(text)):
        piece = _char_skeleton(text[index])
        if not piece:
            continue
        read += piece
        verdict = _verdict(read)
        if verdict is not None:
            return verdict
    return _AFTER_OPENER.match(read) is not None


def neutralise_tags(text: str) -> str:
    """Defuse our block tags in untrusted ``text``: ``</output_a>`` becomes ``&lt;/output_a>``.

    Disguised tags are caught too (module docstring). Tags of other names are left alone
    (answers may legitimately contain HTML or XML), and so is everything but the opener.
    """
    out: list[str] = []
    last = 0
    for match in _CANDIDATE_RE.finditer(text):
        position = match.start()
        if _tag_follows(text, position + 1):
            out.append(text[last:position])
            out.append(DEFUSED_OPENER)
            last = position + 1
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)
