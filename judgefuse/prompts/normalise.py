"""Normalise a judge's choice and confidence *values*: ``"Output (b)"`` -> ``"B"``, ``"85%"`` -> 0.85.

Split from :mod:`.parse` because the value rules are one job, shared by every place a verdict is
found (a JSON object, broken JSON fields, prose) and by callers that hold a value already. Nothing
here raises on any input: what cannot be read comes back as an error string.

Choice values (``selected_output``):
"Output (a)", "Output (A)", "output a", "(a)", "A", "a", "Answer A", "Response A", "Option A",
"Assistant A", "Output 1" (1 = a, 2 = b), with markdown/quotes/trailing punctuation stripped.
A value naming both, a tie, "neither", or anything else gives ``choice=None`` and an error.

Confidence (``confidence_score``):
numbers, numeric strings ("85", "0.85"), percentages ("85%", "85 percent"), and "85/100".
* An explicit ``%`` (or "percent", "/100") means a percentage: value / 100.
* Otherwise a value **v <= 1 is a fraction** and v > 1 is on the 0-100 scale (v / 100).
  So ``1`` and ``"1"`` read as 1.0 (certain), not 1 %: the prompts ask for 0-100, but a judge
  that is 1 % sure of its own pick is implausible, whereas 1 on a 0-1 scale is common. A note
  flags this exact case. ``0`` is 0 on either scale.
* Values above 100 (beyond float round-off, which is clipped silently) or below 0, NaN,
  infinities, booleans, and words ("high") are **invalid**: the confidence is ``None`` and the
  error says why. We never invent a number by clipping a real overshoot.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any, Literal

Letter = Literal["A", "B"]


# ---------------------------------------------------------------- choice values

STRIP_CHARS = " \t\r\n*_`\"'.,;:!?~#>|\u201c\u201d\u2018\u2019"
_PREFIX = r"(?:the\s+)?(?:output|answer|response|option|assistant|candidate|model)"
CHOICE_FULL_RE = re.compile(
    rf"^(?:{_PREFIX}\s*[\(\[]?\s*([ab12])\s*[\)\]]?|[\(\[]?\s*([ab])\s*[\)\]]?)$"
)
_CHOICE_MENTION_RE = re.compile(
    rf"(?:{_PREFIX}\s*[\(\[]?\s*([ab12])\s*[\)\]]?|[\(\[]\s*([ab])\s*[\)\]])(?![a-z0-9])"
)
_TIE_RE = re.compile(r"\b(?:tie|tied|both|neither|equal|equally|none|draw|same)\b")
_DIGIT_TO_LETTER: dict[str, Letter] = {"1": "A", "2": "B", "a": "A", "b": "B"}


def letter_of(match: re.Match[str]) -> Letter:
    """The letter named by the first non-empty group of a choice pattern."""
    return _DIGIT_TO_LETTER[next(g for g in match.groups() if g).casefold()]


def norm_text(value: str) -> str:
    """``value`` NFKC-normalised, whitespace collapsed, markdown/quotes/punctuation stripped, casefolded."""
    return " ".join(unicodedata.normalize("NFKC", value).split()).strip(STRIP_CHARS).casefold()


_CHOICE_CACHE: dict[str, tuple[Letter | None, str | None, tuple[str, ...]]] = {}
_CHOICE_CACHE_MAX = 1024  # judges repeat a few spellings ("Output (a)"); bounded against hostile input


def normalise_choice(value: Any) -> tuple[Letter | None, str | None, tuple[str, ...]]:
    """Map a ``selected_output`` value to ``"A"``/``"B"``: ``(letter, error, notes)``."""
    if type(value) is str and len(value) <= 64:
        cached = _CHOICE_CACHE.get(value)
        if cached is None:
            cached = _normalise_choice(value)
            if len(_CHOICE_CACHE) < _CHOICE_CACHE_MAX:
                _CHOICE_CACHE[value] = cached
        return cached
    return _normalise_choice(value)


def _normalise_choice(value: Any) -> tuple[Letter | None, str | None, tuple[str, ...]]:
    if not isinstance(value, str):
        if value is None:
            return None, "selected_output is null", ()
        return None, f"selected_output is not text: {short_repr(value)}", ()
    text = norm_text(value)
    if not text:
        return None, "selected_output is empty", ()
    match = CHOICE_FULL_RE.match(text)
    if match:
        return letter_of(match), None, ()
    mentions = {_DIGIT_TO_LETTER[a or b] for a, b in _CHOICE_MENTION_RE.findall(text)}
    if len(mentions) == 1 and not _TIE_RE.search(text):
        letter = mentions.pop()
        return letter, None, (f"selected_output {short_repr(value)} read as {letter}",)
    if len(mentions) > 1 or _TIE_RE.search(text):
        return None, f"selected_output names both or neither output (tie?): {short_repr(value)}", ()
    return None, f"unrecognised selected_output: {short_repr(value)}", ()


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages; never raises."""
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ cannot break the parser
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- confidence values

_CONF_STRIP = " \t\r\n*_`\"'\u201c\u201d\u2018\u2019"
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"
_CONF_STR_RE = re.compile(rf"^({NUMBER})\s*(%|percent|/\s*100)?$")


def normalise_confidence(value: Any) -> tuple[float | None, str | None, tuple[str, ...]]:
    """Map a ``confidence_score`` value to [0, 1]: ``(confidence, error, notes)`` (module rules)."""
    percent = False
    if isinstance(value, bool) or value is None:
        return None, f"confidence_score is not a number: {short_repr(value)}", ()
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except (OverflowError, ValueError):
            return None, f"confidence_score is not a finite number: {short_repr(value)}", ()
    elif isinstance(value, str):
        text = " ".join(unicodedata.normalize("NFKC", value).split()).strip(_CONF_STRIP).casefold()
        if re.fullmatch(r"\d+,\d+", text):
            text = text.replace(",", ".")  # a decimal comma
        match = _CONF_STR_RE.match(text)
        if not match:
            return None, f"confidence_score is not a number: {short_repr(value)}", ()
        number = float(match.group(1))
        percent = match.group(2) is not None
    else:
        return None, f"confidence_score is not a number: {short_repr(value)}", ()
    if not math.isfinite(number):
        return None, f"confidence_score is not a finite number: {short_repr(value)}", ()
    notes: tuple[str, ...] = ()
    if number < 0:
        return None, f"confidence_score {short_repr(value)} is negative", ()
    if percent:
        scaled = number / 100.0
    elif number <= 1.0:
        scaled = number
        if number == 1.0:
            notes = ("confidence_score 1 read as a fraction (1.0), not 1%",)
    else:
        scaled = number / 100.0
    if scaled > 1.0:
        if scaled <= 1.0 + 1e-9:
            scaled = 1.0
        else:
            return None, f"confidence_score {short_repr(value)} is above 100", ()
    return scaled, None, notes
