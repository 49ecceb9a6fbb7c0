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

Choice values (``selected_output``; keys are matched ignoring case, spaces, ``_`` and ``-``; the
aliases ``choice``, ``selected``, ``selection``, ``answer``, ``winner``, ``verdict``,
``preferred_output``, ``better_output``, ``best_output`` are accepted with a note):
"Output (a)", "Output (A)", "output a", "(a)", "A", "a", "Answer A", "Response A", "Option A",
"Assistant A", "Output 1" (1 = a, 2 = b), with markdown/quotes/trailing punctuation stripped.
A value naming both, a tie, "neither", or anything else gives ``choice=None`` and an error.

Confidence (``confidence_score``; aliases ``confidence``, ``confidence_level``):
numbers, numeric strings ("85", "0.85"), percentages ("85%", "85 percent"), and "85/100".
* An explicit ``%`` (or "percent", "/100") means a percentage: value / 100.
* Otherwise a value **v <= 1 is a fraction** and v > 1 is on the 0-100 scale (v / 100).
  So ``1`` and ``"1"`` read as 1.0 (certain), not 1 %: the prompts ask for 0-100, but a judge
  that is 1 % sure of its own pick is implausible, whereas 1 on a 0-1 scale is common. A note
  flags this exact case. ``0`` is 0 on either scale.
* Values above 100 (beyond float round-off, which is clipped silently) or below 0, NaN,
  infinities, booleans, and words ("high") are **invalid**: the choice is kept, the confidence
  is ``None`` and ``error`` says why. We never invent a number by clipping a real overshoot.
* A missing confidence keeps the choice, gives ``confidence=None`` and the error
  ``"missing confidence_score"``, unless ``require_confidence=False`` (MP samples).

``choice is None`` always comes with an ``error`` and ``confidence is None``. ``error`` may also
be set with a choice (the confidence was missing or invalid); the caller decides whether such
a vote is usable (for SC it is not). The caller keeps the raw text.
"""

from __future__ import annotations

import ast
import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

Letter = Literal["A", "B"]

MAX_CHARS = 100_000
"""Longer replies are read from their last ``MAX_CHARS`` characters (the verdict comes last)."""
_MAX_DECODE_ATTEMPTS = 500
_MAX_LENIENT_REGION = 20_000
_MAX_LENIENT_LOADS = 50
_MAX_NEST = 6

_CHOICE_KEY = "selectedoutput"
_CHOICE_ALIASES = (
    "choice",
    "selected",
    "selection",
    "answer",
    "winner",
    "verdict",
    "preferredoutput",
    "betteroutput",
    "bestoutput",
)
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


# ---------------------------------------------------------------- choice values

_STRIP_CHARS = " \t\r\n*_`\"'.,;:!?~#>|\u201c\u201d\u2018\u2019"
_PREFIX = r"(?:the\s+)?(?:output|answer|response|option|assistant|candidate|model)"
_CHOICE_FULL_RE = re.compile(
    rf"^(?:{_PREFIX}\s*[\(\[]?\s*([ab12])\s*[\)\]]?|[\(\[]?\s*([ab])\s*[\)\]]?)$"
)
_CHOICE_MENTION_RE = re.compile(
    rf"(?:{_PREFIX}\s*[\(\[]?\s*([ab12])\s*[\)\]]?|[\(\[]\s*([ab])\s*[\)\]])(?![a-z0-9])"
)
_TIE_RE = re.compile(r"\b(?:tie|tied|both|neither|equal|equally|none|draw|same)\b")
_DIGIT_TO_LETTER: dict[str, Letter] = {"1": "A", "2": "B", "a": "A", "b": "B"}


def _letter_of(match: re.Match[str]) -> Letter:
    """The letter named by the first non-empty group of a choice pattern."""
    return _DIGIT_TO_LETTER[next(g for g in match.groups() if g).casefold()]


def _norm_text(value: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", value).split()).strip(_STRIP_CHARS).casefold()


def normalise_choice(value: Any) -> tuple[Letter | None, str | None, tuple[str, ...]]:
    """Map a ``selected_output`` value to ``"A"``/``"B"``: ``(letter, error, notes)``."""
    if not isinstance(value, str):
        if value is None:
            return None, "selected_output is null", ()
        return None, f"selected_output is not text: {_short(value)}", ()
    text = _norm_text(value)
    if not text:
        return None, "selected_output is empty", ()
    match = _CHOICE_FULL_RE.match(text)
    if match:
        return _letter_of(match), None, ()
    mentions = {_DIGIT_TO_LETTER[a or b] for a, b in _CHOICE_MENTION_RE.findall(text)}
    if len(mentions) == 1 and not _TIE_RE.search(text):
        letter = mentions.pop()
        return letter, None, (f"selected_output {_short(value)} read as {letter}",)
    if len(mentions) > 1 or _TIE_RE.search(text):
        return None, f"selected_output names both or neither output (tie?): {_short(value)}", ()
    return None, f"unrecognised selected_output: {_short(value)}", ()


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ cannot break the parser
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- confidence values

_CONF_STRIP = " \t\r\n*_`\"'\u201c\u201d\u2018\u2019"
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"
_CONF_STR_RE = re.compile(rf"^({_NUM})\s*(%|percent|/\s*100)?$")


def normalise_confidence(value: Any) -> tuple[float | None, str | None, tuple[str, ...]]:
    """Map a ``confidence_score`` value to [0, 1]: ``(confidence, error, notes)`` (module rules)."""
    percent = False
    if isinstance(value, bool) or value is None:
        return None, f"confidence_score is not a number: {_short(value)}", ()
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except (OverflowError, ValueError):
            return None, f"confidence_score is not a finite number: {_short(value)}", ()
    elif isinstance(value, str):
        text = " ".join(unicodedata.normalize("NFKC", value).split()).strip(_CONF_STRIP).casefold()
        if re.fullmatch(r"\d+,\d+", text):
            text = text.replace(",", ".")  # a decimal comma
        match = _CONF_STR_RE.match(text)
        if not match:
            return None, f"confidence_score is not a number: {_short(value)}", ()
        number = float(match.group(1))
        percent = match.group(2) is not None
    else:
        return None, f"confidence_score is not a number: {_short(value)}", ()
    if not math.isfinite(number):
        return None, f"confidence_score is not a finite number: {_short(value)}", ()
    notes: tuple[str, ...] = ()
    if number < 0:
        return None, f"confidence_score {_short(value)} is negative", ()
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
            return None, f"confidence_score {_short(value)} is above 100", ()
    return scaled, None, notes


# ---------------------------------------------------------------- finding objects


def _key(name: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", name.casefold()) if isinstance(name, str) else ""


def _find_key(obj: dict[Any, Any], wanted: tuple[str, ...]) -> tuple[str, Any] | None:
    keyed = {_key(k): (k, v) for k, v in obj.items()}
    for want in wanted:
        if want in keyed:
            return keyed[want]
    return None


def _verdict_dicts(obj: Any, depth: int = 0) -> list[tuple[dict[Any, Any], bool]]:
    """Dicts carrying a choice key within ``obj``, in document order: ``(dict, is_alias)``."""
    found: list[tuple[dict[Any, Any], bool]] = []
    if depth > _MAX_NEST:
        return found
    if isinstance(obj, dict):
        inner: list[tuple[dict[Any, Any], bool]] = []
        for value in obj.values():
            if isinstance(value, (dict, list)):
                inner.extend(_verdict_dicts(value, depth + 1))
        if _find_key(obj, (_CHOICE_KEY,)) is not None:
            found.append((obj, False))
        elif not inner and _find_key(obj, _CHOICE_ALIASES) is not None:
            found.append((obj, True))
        # a dict with its own choice key is the verdict; nested ones are quoted material
        if not found:
            found.extend(inner)
    elif isinstance(obj, list):
        for value in obj:
            found.extend(_verdict_dicts(value, depth + 1))
    return found


def _strict_objects(text: str, notes: list[str]) -> list[tuple[int, int, Any]]:
    decoder = json.JSONDecoder()
    out: list[tuple[int, int, Any]] = []
    pos = 0
    attempts = 0
    while True:
        pos = text.find("{", pos)
        if pos < 0:
            break
        attempts += 1
        if attempts > _MAX_DECODE_ATTEMPTS:
            notes.append(f"stopped looking for JSON after {_MAX_DECODE_ATTEMPTS} attempts")
            break
        try:
            obj, end = decoder.raw_decode(text, pos)
        except Exception:
            pos += 1
            continue
        out.append((pos, end, obj))
        pos = max(end, pos + 1)
    return out


_STRUCT_RE = re.compile(r"[{}\"'\\]")


def _balanced_regions(text: str, start: int, stop: int) -> list[tuple[int, int]]:
    """Brace-balanced ``{...}`` pairs in ``text[start:stop]``, outermost first, in one pass.

    Quotes (' and ") are tracked only inside braces (apostrophes in prose are not quotes).
    """
    stack: list[int] = []
    pairs: list[tuple[int, int]] = []
    quote = ""
    skip_to = -1
    for m in _STRUCT_RE.finditer(text, start, stop):
        j = m.start()
        if j < skip_to:
            continue
        ch = m.group()
        if quote:
            if ch == "\\":
                skip_to = j + 2
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            if stack:
                quote = ch
        elif ch == "{":
            stack.append(j)
        elif ch == "}" and stack:
            pairs.append((stack.pop(), j + 1))
    pairs.sort(key=lambda pair: (pair[0], -pair[1]))
    return [p for p in pairs if p[1] - p[0] <= _MAX_LENIENT_REGION]


_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")
_JSON_WORDS_RE = re.compile(r"\b(true|false|null)\b")
_PY_WORDS = {"true": "True", "false": "False", "null": "None"}
_SMART_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})


def _lenient_load(region: str) -> Any:
    candidates = [region]
    straight = region.translate(_SMART_QUOTES)
    if straight != region:
        candidates.append(straight)
    for cand in candidates:
        no_commas = _TRAILING_COMMA_RE.sub(r"\1", cand)
        try:
            return json.loads(no_commas)
        except Exception:
            pass
        pythonic = _JSON_WORDS_RE.sub(lambda m: _PY_WORDS[m.group(1)], cand)
        for src in (cand, pythonic):
            try:
                value = ast.literal_eval(src)
            except Exception:
                continue
            if isinstance(value, dict):
                return value
    return None


def _objects(text: str, notes: list[str]) -> list[tuple[int, Any, bool]]:
    """Every object in the text, in position order: ``(start, value, lenient)``."""
    strict = _strict_objects(text, notes)
    found: list[tuple[int, Any, bool]] = [(s, obj, False) for s, _, obj in strict]
    gaps: list[tuple[int, int]] = []
    cursor = 0
    for s, e, _ in strict:
        gaps.append((cursor, s))
        cursor = e
    gaps.append((cursor, len(text)))
    loads = 0
    for g_start, g_stop in gaps:
        if "{" not in text[g_start:g_stop]:
            continue
        covered_until = -1
        for r_start, r_end in _balanced_regions(text, g_start, g_stop):
            if r_start < covered_until:
                continue  # inside a region already read
            if loads >= _MAX_LENIENT_LOADS:
                notes.append(f"stopped lenient JSON reading after {_MAX_LENIENT_LOADS} regions")
                break
            loads += 1
            value = _lenient_load(text[r_start:r_end])
            if isinstance(value, dict):
                found.append((r_start, value, True))
                covered_until = r_end
    found.sort(key=lambda item: item[0])
    return found


# ---------------------------------------------------------------- building a result


def _explanation_of(obj: dict[Any, Any]) -> str:
    hit = _find_key(obj, _EXPLANATION_KEYS)
    if hit is None:
        return ""
    value = hit[1]
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except Exception:
        return _short(value, 2000)


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
    choice_hit = _find_key(obj, (_CHOICE_KEY,) if not alias else _CHOICE_ALIASES)
    assert choice_hit is not None
    if alias:
        notes.append(f"choice read from key {choice_hit[0]!r}")
    conf_hit = _find_key(obj, _CONFIDENCE_KEYS)
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
    rf"""["']?confidence(?:[ _-]?score)?["']?\s*[:=]\s*["']?\s*({_NUM}\s*%?)""", re.IGNORECASE
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
    rf"(?:about|around|roughly|approximately)?\s*{_B}({_NUM})\s*(%|percent|/\s*100)?",
    re.IGNORECASE,
)


def _from_prose(text: str, notes: list[str], require_confidence: bool) -> ParsedJudgment:
    explanation = text.strip()
    letters: list[tuple[int, Letter]] = []
    only = _norm_text(text)
    whole = _CHOICE_FULL_RE.match(only) if len(only) <= 40 else None
    if whole:
        letters.append((0, _letter_of(whole)))
    else:
        for pattern in _PROSE_PATTERNS:
            for m in pattern.finditer(text):
                letters.append((m.start(), _letter_of(m)))
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
    hit = _find_key(obj, _CHOICE_ALIASES if alias else (_CHOICE_KEY,))
    return None if hit is None else normalise_choice(hit[1])[0]


def _parse(text: str, require_confidence: bool) -> ParsedJudgment:
    notes: list[str] = []
    if len(text) > MAX_CHARS:
        notes.append(f"reply of {len(text)} characters read from its last {MAX_CHARS}")
        text = text[-MAX_CHARS:]
    if not text.strip():
        return ParsedJudgment(None, None, "", "empty reply", tuple(notes))
    objects = _objects(text, notes)
    verdicts: list[tuple[dict[Any, Any], bool, bool]] = []
    for _, value, lenient in objects:
        for obj, alias in _verdict_dicts(value):
            if alias:  # an alias key counts only when its value reads as a choice
                hit = _find_key(obj, _CHOICE_ALIASES)
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
        only = _norm_text(head) if len(head) <= 200 else ""
        if only:
            for prefix in ("answer", "final answer", "verdict", "choice"):
                if only.startswith(prefix + ":") or only.startswith(prefix + " :"):
                    only = only.split(":", 1)[1].strip(_STRIP_CHARS)
                    break
            match = _CHOICE_FULL_RE.match(only)
            if match:
                return _letter_of(match), None
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
