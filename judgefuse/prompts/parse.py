"""Read a judge's reply. Nothing here raises on any ``str``: what cannot be read is reported.

:func:`parse_judgment` reads the SC / MP / fuser JSON reply; :func:`parse_letter` reads a reply
that should be a single letter (logprob mode's text, short MP samples).

Rules (the contract the judges and fusion rely on)
--------------------------------------------------
Where the answer is looked for, in order; the first step that finds a choice field wins:

1. **Strict JSON objects** anywhere in the text (inside a ```json fence or not, with prose
   before or after). The text is scanned left to right; an object that decodes is skipped as a
   whole, so JSON *quoted inside a string* of the judge's object (e.g. an injected verdict the
   judge quotes in its explanation) is never read as a verdict.
2. **Lenient objects**: brace-balanced regions that are not strict JSON are retried with
   trailing commas removed, as Python literals (single quotes), with ``true/false/null``
   mapped, and with typographic quotes straightened. A note says so.
   Among the objects of steps 1-2, the **last** one (by position) that carries a choice key
   is used (a reasoning model may draft a verdict and then revise it); if the objects disagree
   a note says so. (So a judge that repeats an injected verdict verbatim *after* its own, outside
   any string, is read as that one: the note is the audit trail.) An object nested in
   another (``{"verdict": {...}}``) counts. A note records how many objects were seen when
   there was more than one.
3. **Broken JSON fields**: ``"selected_output": "..."`` / ``"confidence_score": ...`` read by
   pattern when no object decodes (typically a reply cut off mid-explanation). Last match wins.
4. **Prose**: decision phrases such as "Output (b) is better", "the better output is Output
   (b)", "I choose B", "Final answer: Output (a)", or a reply that is only a choice
   ("Output (b)", "B"), plus "confidence: 70%". A note says the verdict was read from prose.
   If the phrases point to both outputs the reply is *ambiguous*: no choice, with an error.
   Prose never guesses from a bare mention of an output.

Keys are matched ignoring case, spaces, ``_`` and ``-``; for the choice the aliases ``choice``,
``selected``, ``selection``, ``answer``, ``winner``, ``verdict``, ``preferred_output``,
``better_output``, ``best_output`` are accepted with a note; for the confidence ``confidence`` and
``confidence_level``. How choice and confidence *values* are read (``"Output (b)"``, ``"85%"``,
``1`` as a fraction, what is invalid) is in :mod:`.normalise`; finding the objects, and the
bounds on that work, in :mod:`.json_extract`.

An invalid confidence keeps the choice, with ``confidence=None`` and an ``error`` saying why. A
missing confidence keeps the choice, gives ``confidence=None`` and the error
``"missing confidence_score"``, unless ``require_confidence=False`` (MP samples).

``choice is None`` always comes with an ``error`` and ``confidence is None``. ``error`` may also
be set with a choice (the confidence was missing or invalid); the caller decides whether such
a vote is usable (for SC it is not). The caller keeps the raw text.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from judgefuse.prompts.json_extract import CHOICE_ALIASES, CHOICE_KEY, find_key, find_objects, verdict_dicts
from judgefuse.prompts.normalise import (
    CHOICE_FULL_RE,
    NUMBER,
    STRIP_CHARS,
    Letter,
    letter_of,
    norm_text,
    normalise_choice,
    normalise_confidence,
    short_repr,
)

MAX_CHARS = 100_000
"""Longer replies are read from their last ``MAX_CHARS`` characters (the verdict comes last)."""

_CONFIDENCE_KEYS = ("confidencescore", "confidence", "confidencelevel")
_EXPLANATION_KEYS = ("explanation", "reasoning", "rationale", "reason", "justification")


@dataclass(frozen=True)
class ParsedJudgment:
    """What could be read from one judge reply.

    ``choice``: ``"A"``/``"B"`` or ``None`` (unreadable, tie, ambiguous). ``confidence``: the
    judge's confidence in its own choice in [0, 1], or ``None``. ``error``: why the reply is
    not a complete verdict (``None`` when it is). ``notes``: non-fatal remarks on how it was read.
    """

    choice: Letter | None
    confidence: float | None
    explanation: str = ""
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """A choice was read and nothing is missing."""
        return self.choice is not None and self.error is None

    def choice_confidence(self) -> tuple[float | None, str | None]:
        """The confidence to give the chosen answer, and a note when it was changed.

        A judge cannot be less than even on the answer it chose between two: a confidence
        below 0.5 (read literally above) is taken as 0.5, a coin flip, never as a vote for the
        other answer (a small model under the verdict schema answered "Output (a)" at 0 on every
        pair, which read as p_a = 0 argued for B). Used by every consumer of a verdict JSON.
        """
        if self.confidence is None or self.confidence >= 0.5:
            return self.confidence, None
        return 0.5, f"confidence {self.confidence:.2f} below 0.5 for the chosen answer: read as 0.5"


# ---------------------------------------------------------------- building a result


def _explanation_of(obj: dict[Any, Any]) -> str:
    hit = find_key(obj, _EXPLANATION_KEYS)
    if hit is None:
        return ""
    value = hit[1]
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except Exception:
        return short_repr(value, 2000)


def _from_fields(
    choice_value: Any,
    choice_key: str,
    conf_present: bool,
    conf_value: Any,
    explanation: str,
    notes: list[str],
    require_confidence: bool,
) -> ParsedJudgment:
    letter, error, choice_notes = normalise_choice(choice_value)
    notes.extend(choice_notes)
    if letter is None:
        error = error or f"unreadable {choice_key}"
        return ParsedJudgment(None, None, explanation, error, tuple(notes))
    confidence: float | None = None
    error = None
    if conf_present:
        confidence, error, conf_notes = normalise_confidence(conf_value)
        notes.extend(conf_notes)
        if error is not None and not require_confidence:
            notes.append(f"ignored: {error}")
            error = None
    elif require_confidence:
        error = "missing confidence_score"
    return ParsedJudgment(letter, confidence, explanation, error, tuple(notes))


def _from_object(
    obj: dict[Any, Any], alias: bool, notes: list[str], require_confidence: bool
) -> ParsedJudgment:
    choice_hit = find_key(obj, (CHOICE_KEY,) if not alias else CHOICE_ALIASES)
    assert choice_hit is not None
    if alias:
        notes.append(f"choice read from key {choice_hit[0]!r}")
    conf_hit = find_key(obj, _CONFIDENCE_KEYS)
    return _from_fields(
        choice_hit[1],
        "selected_output",
        conf_hit is not None,
        conf_hit[1] if conf_hit is not None else None,
        _explanation_of(obj),
        notes,
        require_confidence,
    )


_FIELD_CHOICE_RE = re.compile(
    r"""["']?selected[ _-]?output["']?\s*[:=]\s*["']?([^"'\n,}\]]{1,40})""", re.IGNORECASE
)
_FIELD_CONF_RE = re.compile(
    rf"""["']?confidence(?:[ _-]?score)?["']?\s*[:=]\s*["']?\s*({NUMBER}\s*%?)""", re.IGNORECASE
)
_FIELD_EXPL_RE = re.compile(r'"explanation"\s*:\s*"((?:[^"\\]|\\.)*)', re.IGNORECASE | re.DOTALL)


def _from_broken_fields(
    text: str, notes: list[str], require_confidence: bool
) -> ParsedJudgment | None:
    choices = _FIELD_CHOICE_RE.findall(text)
    if not choices:
        return None
    notes.append("read from malformed or incomplete JSON fields")
    confs = _FIELD_CONF_RE.findall(text)
    explanation = ""
    expl = _FIELD_EXPL_RE.findall(text)
    if expl:
        raw = expl[-1]
        try:
            explanation = json.loads('"' + raw + '"')
        except Exception:
            explanation = raw
    return _from_fields(
        choices[-1], "selected_output", bool(confs), confs[-1] if confs else None,
        explanation, notes, require_confidence,
    )


# A choice inside prose: "Output (b)", "Answer 1", "(a)", or a bare *capital* A/B (a lower-case
# bare "a" is an article: "I choose a better ...").
_LETTER = (
    r"(?:(?:output|answer|response|option|assistant|candidate)\s*[\(\[]?\s*([ab12])\s*[\)\]]?"
    r"|[\(\[]\s*([ab])\s*[\)\]]"
    r"|(?-i:([AB])))"
    r"(?![a-z0-9])"
)
_B = r"[\s*_`\"']*"  # markdown emphasis, code ticks and quotes around a phrase
_PROSE_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        # "Output (b) is better", "Response A is clearly the stronger one"
        rf"{_LETTER}{_B}\s+is\s+(?:clearly\s+|slightly\s+|much\s+|definitely\s+)?(?:the\s+)?"
        r"(?:better|best|superior|preferred|stronger|winner|more\s+(?:accurate|correct|helpful))",
        # "the better output is Output (b)", "the best response is: A"
        r"(?:better|best|preferred|superior|stronger|winning)\s+"
        rf"(?:output|answer|response|option|one)\s+(?:is|would\s+be)\s*:?{_B}\s*{_LETTER}",
        # "I choose B", "I'd pick Output (a)", "my choice is A", "the answer is B"
        r"(?:i\s+(?:would\s+|will\s+)?(?:choose|select|pick|prefer)"
        r"|i'd\s+(?:choose|select|pick|prefer)"
        r"|(?:my|the|final)\s+(?:choice|pick|verdict|answer|selection|decision)\s+is)"
        rf"\s*:?{_B}\s*(?:the\s+)?{_LETTER}",
        # "Final answer: B", "Verdict: Output (a)", "Selected output - Output (b)", "Winner: A"
        r"(?:final\s+(?:answer|verdict|choice|decision)|verdict|decision|choice|winner"
        rf"|selected[\s_-]*output|selection)\s*(?:is)?\s*[:=\-]{_B}\s*{_LETTER}",
    )
]
_PROSE_CONF_RE = re.compile(
    rf"confidence(?:[\s_-]*(?:score|level))?{_B}\s*(?:is|of|at|:|=|-)?\s*"
    rf"(?:about|around|roughly|approximately)?\s*{_B}({NUMBER})\s*(%|percent|/\s*100)?",
    re.IGNORECASE,
)


def _from_prose(text: str, notes: list[str], require_confidence: bool) -> ParsedJudgment:
    explanation = text.strip()
    letters: list[tuple[int, Letter]] = []
    only = norm_text(text)
    whole = CHOICE_FULL_RE.match(only) if len(only) <= 40 else None
    if whole:
        letters.append((0, letter_of(whole)))
    else:
        for pattern in _PROSE_PATTERNS:
            for m in pattern.finditer(text):
                letters.append((m.start(), letter_of(m)))
    if not letters:
        error = "no verdict found: no JSON object and no decision phrase"
        return ParsedJudgment(None, None, explanation, error, tuple(notes))
    distinct = {letter for _, letter in letters}
    if len(distinct) > 1:
        error = "ambiguous prose: decision phrases name both outputs"
        return ParsedJudgment(None, None, explanation, error, tuple(notes))
    notes.append("read from prose (no JSON verdict found)")
    conf_matches = list(_PROSE_CONF_RE.finditer(text))
    conf_value: Any = None
    if conf_matches:
        m = conf_matches[-1]
        conf_value = m.group(1) + ("%" if m.group(2) else "")
    return _from_fields(
        distinct.pop(), "selected_output", bool(conf_matches), conf_value,
        explanation, notes, require_confidence,
    )


def _choice_value_letter(obj: dict[Any, Any], alias: bool) -> Letter | None:
    hit = find_key(obj, CHOICE_ALIASES if alias else (CHOICE_KEY,))
    return None if hit is None else normalise_choice(hit[1])[0]


def _parse(text: str, require_confidence: bool) -> ParsedJudgment:
    notes: list[str] = []
    if len(text) > MAX_CHARS:
        notes.append(f"reply of {len(text)} characters read from its last {MAX_CHARS}")
        text = text[-MAX_CHARS:]
    if not text.strip():
        return ParsedJudgment(None, None, "", "empty reply", tuple(notes))
    objects = find_objects(text, notes)
    verdicts: list[tuple[dict[Any, Any], bool, bool]] = []
    for _, value, lenient in objects:
        for obj, alias in verdict_dicts(value):
            if alias:  # an alias key counts only when its value reads as a choice
                hit = find_key(obj, CHOICE_ALIASES)
                if hit is None or normalise_choice(hit[1])[0] is None:
                    continue
            verdicts.append((obj, alias, lenient))
    if verdicts:
        primary = [v for v in verdicts if not v[1]]
        pool = primary or verdicts
        obj, alias, lenient = pool[-1]
        if len(pool) > 1:
            notes.append(f"{len(pool)} verdict objects found; used the last")
            seen = {_choice_value_letter(o, a) for o, a, _ in pool}
            if len(seen) > 1:
                notes.append("verdict objects disagree on the choice")
        if lenient:
            notes.append("JSON read leniently (not strict JSON)")
        return _from_object(obj, alias, notes, require_confidence)
    broken = _from_broken_fields(text, notes, require_confidence)
    if broken is not None:
        return broken
    return _from_prose(text, notes, require_confidence)


def parse_judgment(text: str, *, require_confidence: bool = True) -> ParsedJudgment:
    """Read a judge's JSON verdict (SC, MP, fuser) from ``text``. Never raises.

    ``require_confidence=False`` for replies that are not asked for a confidence (MP samples):
    then a missing or unreadable confidence is not an error (it is noted when unreadable).
    See the module docstring for every rule.
    """
    if not isinstance(text, str):
        return ParsedJudgment(None, None, "", f"reply is not text: {type(text).__name__}")
    try:
        return _parse(text, require_confidence)
    except Exception as exc:  # pragma: no cover - a safety net; the property tests keep it unused
        return ParsedJudgment(None, None, "", f"internal parser error: {type(exc).__name__}: {exc}")


_LEADING_LETTER_RE = re.compile(r"^[\s*_`\"'(\[]*([AB])(?:[\s*_`\"')\]]*$|[)\].:,;!*]|\s*\n)")


def parse_letter(text: str) -> tuple[Letter | None, str | None]:
    """Read a reply that should be the single letter A or B. Never raises.

    Accepted: the letter in either case with whitespace, markdown, quotes, brackets or trailing
    punctuation around it ("A", " b", "**B**", "(a)", "A."), a full choice phrase ("Output (a)",
    "Answer: B"), a capital A/B followed by punctuation or a line break and then more text
    ("B.\\nBecause ..."; a capital "A " followed by a word is an article, not an answer), and,
    failing those, a verdict :func:`parse_judgment` can read (JSON or a decision phrase).
    """
    if not isinstance(text, str):
        return None, f"reply is not text: {type(text).__name__}"
    try:
        head = text[:MAX_CHARS]
        only = norm_text(head) if len(head) <= 200 else ""
        if only:
            for prefix in ("answer", "final answer", "verdict", "choice"):
                if only.startswith(prefix + ":") or only.startswith(prefix + " :"):
                    only = only.split(":", 1)[1].strip(STRIP_CHARS)
                    break
            match = CHOICE_FULL_RE.match(only)
            if match:
                return letter_of(match), None
        lead = _LEADING_LETTER_RE.match(unicodedata.normalize("NFKC", head[:200]))
        if lead:
            return lead.group(1), None  # type: ignore[return-value]
        if not text.strip():
            return None, "empty reply"
        parsed = parse_judgment(text, require_confidence=False)
        if parsed.choice is not None:
            return parsed.choice, None
        return None, f"no single letter A or B ({parsed.error})"
    except Exception as exc:  # pragma: no cover - safety net
        return None, f"internal parser error: {type(exc).__name__}: {exc}"
