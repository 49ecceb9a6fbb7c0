"""Find the JSON objects in a judge's reply, strictly and then leniently, within fixed bounds.

Split from :mod:`.parse` because locating objects in free text is a job of its own (and the
part of the parser with the most edge cases); :mod:`.parse` decides what a found object says.
Nothing here raises on any ``str``.

* **Strict objects** anywhere in the text (inside a ```json fence or not, with prose before or
  after). The text is scanned left to right; an object that decodes is skipped as a whole, so
  JSON *quoted inside a string* of the judge's object is never read as an object of its own.
* **Lenient objects**: brace-balanced regions in the gaps between strict objects are retried with
  trailing commas removed, as Python literals (single quotes), with ``true/false/null`` mapped,
  and with typographic quotes straightened.
* **Bounds**, so a hostile or huge reply costs little: at most ``_MAX_DECODE_ATTEMPTS`` strict
  decodes, ``_MAX_LENIENT_LOADS`` lenient regions of at most ``_MAX_LENIENT_REGION`` characters,
  and nesting read ``_MAX_NEST`` levels deep; hitting a bound adds a note.
* **Keys** are matched ignoring case, spaces, ``_`` and ``-`` (:func:`find_key`). A verdict
  object carries ``selected_output`` (:data:`CHOICE_KEY`) or one of :data:`CHOICE_ALIASES`;
  :func:`verdict_dicts` finds them, nested ones included.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_MAX_DECODE_ATTEMPTS = 500
_MAX_LENIENT_REGION = 20_000
_MAX_LENIENT_LOADS = 50
_MAX_NEST = 6

CHOICE_KEY = "selectedoutput"
CHOICE_ALIASES = (
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


_NON_ALNUM_RE = re.compile(r"[^a-z0-9]")
_KEY_CACHE: dict[str, str] = {}
_KEY_CACHE_MAX = 4096  # judges use a handful of key spellings; a hostile reply cannot grow it


def _key(name: Any) -> str:
    if not isinstance(name, str):
        return ""
    key = _KEY_CACHE.get(name)
    if key is None:
        key = _NON_ALNUM_RE.sub("", name.casefold())
        if len(_KEY_CACHE) < _KEY_CACHE_MAX and len(name) <= 64:
            _KEY_CACHE[name] = key
    return key


_KEYMAP_CACHE: dict[tuple[Any, ...], dict[str, Any]] = {}
_KEYMAP_CACHE_MAX = 512


def _keymap(obj: dict[Any, Any]) -> dict[str, Any]:
    """Normalised key -> original key of ``obj`` (the last original key wins, as in a dict build).

    A verdict object is searched for several keys; the map for one set of keys is kept (bounded:
    small objects with short keys only), so a judge's usual reply shape is normalised once.
    """
    keys = tuple(obj)
    keymap = _KEYMAP_CACHE.get(keys)
    if keymap is None:
        keymap = {}
        cacheable = len(keys) <= 8 and len(_KEYMAP_CACHE) < _KEYMAP_CACHE_MAX
        for k in keys:
            keymap[_key(k)] = k
            if cacheable and not (isinstance(k, str) and len(k) <= 64):
                cacheable = False
        if cacheable:
            _KEYMAP_CACHE[keys] = keymap
    return keymap


def find_key(obj: dict[Any, Any], wanted: tuple[str, ...]) -> tuple[str, Any] | None:
    """``(original key, value)`` of the first of ``wanted`` (normalised keys) that ``obj`` has, or None."""
    keymap = _keymap(obj)
    for want in wanted:
        if want in keymap:
            original = keymap[want]
            return original, obj[original]
    return None


def verdict_dicts(obj: Any, depth: int = 0) -> list[tuple[dict[Any, Any], bool]]:
    """Dicts carrying a choice key within ``obj``, in document order: ``(dict, is_alias)``."""
    found: list[tuple[dict[Any, Any], bool]] = []
    if depth > _MAX_NEST:
        return found
    if isinstance(obj, dict):
        inner: list[tuple[dict[Any, Any], bool]] = []
        for value in obj.values():
            if isinstance(value, (dict, list)):
                inner.extend(verdict_dicts(value, depth + 1))
        if find_key(obj, (CHOICE_KEY,)) is not None:
            found.append((obj, False))
        elif not inner and find_key(obj, CHOICE_ALIASES) is not None:
            found.append((obj, True))
        # a dict with its own choice key is the verdict; nested ones are quoted material
        if not found:
            found.extend(inner)
    elif isinstance(obj, list):
        for value in obj:
            found.extend(verdict_dicts(value, depth + 1))
    return found


_DECODER = json.JSONDecoder()  # stateless; building one costs more than a small decode


def _strict_objects(text: str, notes: list[str]) -> list[tuple[int, int, Any]]:
    decoder = _DECODER
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


def find_objects(text: str, notes: list[str]) -> list[tuple[int, Any, bool]]:
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
