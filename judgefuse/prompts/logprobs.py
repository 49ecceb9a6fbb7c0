"""Logprob mode: the probabilities of A and B from the first output token's top log-probabilities.

Rules
-----
* Input: the top-k alternatives of the **first** output token, each a ``(token, logprob)`` pair
  (a mapping with ``token``/``logprob`` keys or an object with those attributes, as providers
  return them, is read too). Entries that are not a text token with a finite logprob <= 0 are
  skipped with a note (a logprob up to 1e-6 above 0 is float round-off and read as 0;
  ``-inf`` is a zero probability and skipped silently). Never raises.
* Token variants are merged: NFKC-normalised; whitespace, punctuation, markdown and tokenizer
  space markers (``Ġ``, ``▁``) stripped; casefolded. A token that is then exactly ``a`` (or
  ``b``) is a variant of A (or B): " A", "A", "a", "(a", "**A", "A." are all A. Probabilities of
  variants are summed (logsumexp of their logprobs).
* Both letters present: ``p_a = P_A / (P_A + P_B)`` (softmax over the two merged logprobs).
* Only one present, say A: B's probability is not known, but as it is outside the top-k it is
  at most the smallest listed probability, and at most the mass the list leaves unaccounted
  (``1 - sum of listed probabilities``). We give B that upper bound,
  ``P_B = min(p_min, max(0, 1 - listed mass))`` (computed in log space), so the reported
  confidence in A is a lower bound of the two-way softmax: honest, never inflated. A note
  records it.
* Neither present: ``error = "neither A nor B in top logprobs"``; ``p_a``/``p_b`` are ``None``.
  Never guessed.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

_ROUND_OFF = 1e-6
_MARKERS = "\u0120\u2581\u010a"  # byte-level BPE space "Ġ", SentencePiece "▁", newline "Ċ"


@dataclass(frozen=True)
class LetterProbs:
    """The two-way probabilities of A and B (``p_a + p_b == 1``), or ``error`` and ``None``s."""

    p_a: float | None
    p_b: float | None
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def choice(self) -> Literal["A", "B"] | None:
        """The more probable letter; ``None`` on an error or an exact tie."""
        if self.p_a is None or self.p_b is None or self.p_a == self.p_b:
            return None
        return "A" if self.p_a > self.p_b else "B"

    @property
    def confidence(self) -> float | None:
        """``max(p_a, p_b)``: the logprob confidence of "Overconfidence in LLM-as-a-Judge" (``None`` on an error)."""
        if self.p_a is None or self.p_b is None:
            return None
        return max(self.p_a, self.p_b)


def token_letter(token: str) -> Literal["A", "B"] | None:
    """``"A"``/``"B"`` if ``token`` is a variant of that letter, else ``None``."""
    text = unicodedata.normalize("NFKC", token)
    kept = "".join(
        ch
        for ch in text
        if ch not in _MARKERS and not ch.isspace() and unicodedata.category(ch)[0] not in "PSZC"
    )
    folded = kept.casefold()
    if folded == "a":
        return "A"
    if folded == "b":
        return "B"
    return None


def _entry(item: Any) -> tuple[Any, Any]:
    if isinstance(item, Mapping):
        return item.get("token"), item.get("logprob")
    if isinstance(item, (tuple, list)):
        if len(item) != 2:
            raise ValueError("not a pair")
        return item[0], item[1]
    return item.token, item.logprob


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


def _read(top_logprobs: Iterable[Any]) -> LetterProbs:
    notes: list[str] = []
    letters: dict[str, list[float]] = {"A": [], "B": []}
    listed: list[float] = []
    skipped = 0
    for item in top_logprobs:
        try:
            token, logprob = _entry(item)
        except Exception:
            skipped += 1
            continue
        if (
            not isinstance(token, str)
            or isinstance(logprob, bool)
            or not isinstance(logprob, (int, float))
        ):
            skipped += 1
            continue
        try:
            value = float(logprob)
        except (OverflowError, ValueError):
            skipped += 1
            continue
        if value == -math.inf:
            continue
        if math.isnan(value) or value > _ROUND_OFF or value == math.inf:
            skipped += 1
            continue
        value = min(value, 0.0)
        listed.append(value)
        letter = token_letter(token)
        if letter is not None:
            letters[letter].append(value)
    if skipped:
        notes.append(f"skipped {skipped} malformed top-logprob entries")
    if not letters["A"] and not letters["B"]:
        return LetterProbs(None, None, "neither A nor B in top logprobs", tuple(notes))
    for name, values in letters.items():
        if len(values) > 1:
            notes.append(f"merged {len(values)} token variants of {name}")
    if letters["A"] and letters["B"]:
        l_a = _logsumexp(letters["A"])
        l_b = _logsumexp(letters["B"])
        p_a = 1.0 / (1.0 + math.exp(l_b - l_a)) if l_b - l_a < 700 else 0.0
        return LetterProbs(p_a, 1.0 - p_a, None, tuple(notes))
    present = "A" if letters["A"] else "B"
    absent = "B" if present == "A" else "A"
    l_present = _logsumexp(letters[present])
    l_min = min(listed)
    unlisted = 1.0 - math.fsum(math.exp(v) for v in listed)
    l_absent = min(l_min, math.log(unlisted) if unlisted > 0 else -math.inf)
    notes.append(
        f"{absent} not in top logprobs: given its upper bound {math.exp(l_absent):.3g} "
        "(min of the smallest listed probability and the unlisted mass)"
    )
    share = 1.0 / (1.0 + math.exp(l_absent - l_present))  # l_absent <= l_present: no overflow
    if present == "A":
        return LetterProbs(share, 1.0 - share, None, tuple(notes))
    return LetterProbs(1.0 - share, share, None, tuple(notes))


def letter_probabilities(top_logprobs: Iterable[Any]) -> LetterProbs:
    """Probabilities of A and B from the first token's top logprobs. Never raises (module rules)."""
    try:
        return _read(top_logprobs)
    except Exception as exc:  # e.g. not iterable, or an iterator that fails midway
        return LetterProbs(None, None, f"could not read top logprobs: {type(exc).__name__}: {exc}")
