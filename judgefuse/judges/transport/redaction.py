"""Scrub provider secrets, and the usual encodings of them, out of text taken from a server.

Why more than ``text.replace(secret, "***")``: a provider that echoes the key (in an error, a
debug blob, a reply the model was tricked into writing) does not always echo it verbatim. An
``Authorization: Basic`` header is base64; a URL in an error is percent-encoded; a JSON or HTML
body escapes characters (``\\u0073``, ``&#115;``); a dump may be hex. :class:`SecretScrubber`
matches, for each secret of at least :data:`MIN_ENCODED_SECRET` characters:

* the secret with every character written literally or escaped (``%73``, ``\\u0073``,
  ``\\x73``, ``&#115;``, ``&#x73;``), in any mix and any letter case (a full URL encoding
  is one such mix; so is ``urllib.parse.quote``);
* its hex, either case;
* its base64, standard and urlsafe alphabets, at each of the 3 byte alignments the key can
  sit at inside a longer encoded blob: the characters that encode only the key's bits, plus
  the one mixed character on each side and any ``=`` padding (so padded and unpadded both go).

A shorter secret (a placeholder such as ``"none"``) is replaced only where it appears verbatim:
matching its encodings would eat ordinary words.

Cuts: text is always scrubbed *before* it is cut, and after the cut the tail is checked for a
prefix (>= :data:`MIN_FRAGMENT` characters) of the secret or of one of its encodings, so a key
that the source itself truncated cannot survive as a fragment at the end of a cut either.
Where: both clients pass every response through :func:`scrub_response` (texts, first-token
alternatives, model name) before returning it, i.e. below the response cache, which therefore
never stores a key; error texts go through :func:`~.errors.redact`; votes through
:func:`judgefuse.judges.finalise.finalise_vote`.

To keep this cheap on a multi-megabyte body, :meth:`SecretScrubber.cut` scrubs only the first
``limit + margin`` characters, where the margin is longer than any encoded form: whatever
starts before the cut is matched whole, and the rest is thrown away anyway.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Iterable
from functools import lru_cache

from judgefuse.judges.transport.request import ChatResponse

__all__ = [
    "MIN_ENCODED_SECRET",
    "MIN_FRAGMENT",
    "REDACTED",
    "SecretScrubber",
    "cap_utf8",
    "scrub_response",
    "scrubber_for",
]

REDACTED = "***"
MIN_ENCODED_SECRET = 8
"""Secrets shorter than this are only matched verbatim (see the module docstring)."""
MIN_FRAGMENT = 8
"""A prefix of a secret (or of an encoding of it) this long at the end of a cut is removed."""

_B64_STD = "A-Za-z0-9+/"  # regex class bodies of the two base64 alphabets
_B64_URL = "A-Za-z0-9_-"


def _escaped_char(char: str) -> str:
    """A regex for ``char`` written literally or escaped (percent, JSON, Python, HTML)."""
    code = ord(char)
    alternatives = [re.escape(char)]
    if code < 0x100:
        alternatives += [f"%{code:02x}", rf"\\x{code:02x}"]
    alternatives += [rf"\\u{code:04x}", f"&#0{{0,8}}{code};", f"&#x0{{0,8}}{code:x};"]
    return "(?:" + "|".join(alternatives) + ")"


def _base64_cores(secret: bytes) -> list[tuple[str, str]]:
    """(alphabet class, core) per alignment and alphabet: the characters encoding only key bits."""
    cores: list[tuple[str, str]] = []
    for alignment in range(3):
        padded = b"\0" * alignment + secret + b"\0\0"
        start = -(-8 * alignment // 6)  # ceil: first character fully inside the key's bits
        end = (8 * alignment + 8 * len(secret)) // 6
        standard = base64.b64encode(padded).decode("ascii")[start:end]
        urlsafe = base64.urlsafe_b64encode(padded).decode("ascii")[start:end]
        cores.append((_B64_STD, standard))
        if urlsafe != standard:
            cores.append((_B64_URL, urlsafe))
    return cores


_ESCAPE_MARKERS = ("%", "\\", "&#")
_MAX_WINDOWS = 10_000
_MAX_CHAR_FORM = 20
"""The longest one character of a secret can be written (``&#x00000000073;``)."""


class _EncodedSecret:
    """The patterns of one secret, with cheap substring tests that decide whether to run them."""

    __slots__ = ("b64_cores", "b64_pattern", "fragments", "hex", "lower", "text_pattern")

    def __init__(self, secret: str) -> None:
        raw = secret.encode("utf-8")
        self.lower = secret.lower()
        self.hex = raw.hex()
        # the secret with each character literal or escaped, in any case; or its hex
        self.text_pattern = re.compile(
            "".join(_escaped_char(c) for c in secret) + "|" + re.escape(self.hex), re.IGNORECASE
        )
        cores = [(alphabet, core) for alphabet, core in _base64_cores(raw) if len(core) >= 4]
        self.b64_cores = tuple(core for _, core in cores)
        self.b64_pattern = re.compile("|".join(f"[{a}]?{re.escape(core)}[{a}]?=*" for a, core in cores))
        self.fragments: tuple[tuple[str, bool], ...] = (
            (secret, True),
            (self.hex, True),
            ("".join(f"%{b:02x}" for b in raw), True),
            *((core, False) for core in self.b64_cores),
        )

    def _scrub_near_escapes(self, text: str) -> str:
        """The escaped forms of the secret, looked for only around escape sequences.

        Without the secret verbatim (tested by the caller), a match must contain an escape, so
        the full pattern runs only in windows of :data:`_MAX_CHAR_FORM` characters per secret
        character around each escape; a reply with a stray ``%`` costs one fast scan.
        """
        reach = _MAX_CHAR_FORM * len(self.lower)
        positions: list[int] = []
        for marker in _ESCAPE_MARKERS:  # str.find skips through text at C speed
            index = text.find(marker)
            while index != -1:
                positions.append(index)
                if len(positions) > _MAX_WINDOWS:  # escapes everywhere: one pass over all of it
                    return self.text_pattern.sub(REDACTED, text)
                index = text.find(marker, index + 1)
        windows: list[list[int]] = []
        for position in sorted(positions):
            low, high = max(0, position - reach), position + reach
            if windows and low <= windows[-1][1]:
                windows[-1][1] = high
            else:
                windows.append([low, high])
        out: list[str] = []
        done = 0
        for low, high in windows:
            for match in self.text_pattern.finditer(text, max(low, done), high):
                out += [text[done : match.start()], REDACTED]
                done = match.end()
        return "".join(out) + text[done:] if out else text

    def scrub(self, text: str, lowered: str, escapes: bool) -> str:
        """``text`` without this secret; ``lowered`` is ``text.lower()``, ``escapes`` whether it
        holds any escape marker (``%``, ``\\``, ``&#``): substring tests, C-fast, decide which
        regexes need to run at all (a multi-megabyte reply without the key costs a few scans)."""
        if self.lower in lowered or self.hex in lowered:
            text = self.text_pattern.sub(REDACTED, text)
        elif escapes:
            text = self._scrub_near_escapes(text)
        if any(core in text for core in self.b64_cores):
            text = self.b64_pattern.sub(REDACTED, text)
        return text


class SecretScrubber:
    """Replaces configured secrets and their encodings with ``***`` (module docstring).

    Build once per set of secrets (:func:`scrubber_for` caches them); :meth:`scrub` works on
    text of any length, :meth:`cut` scrubs and cuts, and never leaves a fragment at the cut.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        unique = sorted({s for s in secrets if s}, key=len, reverse=True)
        self.secrets = tuple(unique)
        self._verbatim = tuple(s for s in unique if len(s) < MIN_ENCODED_SECRET)
        self._encoded = tuple(_EncodedSecret(s) for s in unique if len(s) >= MIN_ENCODED_SECRET)
        self._fragments = tuple(fragment for entry in self._encoded for fragment in entry.fragments)
        self._longest_fragment = max((len(form) for form, _ in self._fragments), default=0)
        longest = max((len(s) for s in unique), default=0)
        self.margin = _MAX_CHAR_FORM * longest + 16
        """Characters past a cut that :meth:`cut` still scrubs (longer than any encoded form)."""

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def scrub(self, text: str) -> str:
        """``text`` with every secret and every encoding of one replaced by ``***``."""
        if not self.secrets or not text:
            return text
        for secret in self._verbatim:
            text = text.replace(secret, REDACTED)
        if self._encoded:
            lowered = text.lower()
            escapes = any(marker in lowered for marker in _ESCAPE_MARKERS)
            for entry in self._encoded:
                text = entry.scrub(text, lowered, escapes)
        return text

    def drop_fragment(self, text: str) -> str:
        """``text`` without a trailing prefix (>= MIN_FRAGMENT chars) of a secret or its encoding.

        Only the prefixes that end in the text's last character are compared, so this costs a
        few ``find`` calls per form, not one comparison per prefix length.
        """
        if not self._fragments or len(text) < MIN_FRAGMENT:
            return text
        tail = text[-self._longest_fragment :]
        tail_lower = tail.lower()
        cut = 0
        for form, case_insensitive in self._fragments:
            probe, subject = (form.lower(), tail_lower) if case_insensitive else (form, tail)
            last = subject[-1]
            end = probe.find(last, MIN_FRAGMENT - 1)
            while end != -1 and end < len(probe) - 1:  # the whole form was scrubbed already
                if end + 1 > cut and subject.endswith(probe[: end + 1]):
                    cut = end + 1
                end = probe.find(last, end + 1)
        return text[: len(text) - cut] + REDACTED if cut else text

    def cut(self, text: str, limit: int) -> tuple[str, bool]:
        """(``text`` scrubbed, then cut to ``limit`` characters, then fragment-checked; whether cut).

        Only the first ``limit + margin`` characters are scrubbed: any secret starting before
        ``limit`` ends inside them, and everything after is discarded.
        """
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        head = text[: limit + self.margin] if self.secrets else text[: limit + 1]
        clean = self.scrub(head)
        if len(clean) <= limit and len(head) == len(text):
            return self.drop_fragment(clean), False
        return self.drop_fragment(clean[:limit]), True


@lru_cache(maxsize=256)
def _scrubber(secrets: tuple[str, ...]) -> SecretScrubber:
    return SecretScrubber(secrets)


def scrubber_for(*secrets: str | None) -> SecretScrubber:
    """The (cached) scrubber for ``secrets`` (None and empty strings are ignored)."""
    if not any(secrets):  # no key (a local or keyless judge): every vote asks this
        return _scrubber(())
    return _scrubber(tuple(sorted({s for s in secrets if s})))


def cap_utf8(text: str, max_bytes: int) -> tuple[str, bool]:
    """(``text`` cut to at most ``max_bytes`` UTF-8 bytes at a character boundary, whether cut)."""
    if len(text) <= max_bytes // 4:
        return text, False  # even at 4 bytes a character it fits
    head = text[: max_bytes + 1]  # a character is >= 1 byte: this holds more than max_bytes if cut
    encoded = head.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes and len(head) == len(text):
        return text, False
    return encoded[:max_bytes].decode("utf-8", "ignore"), True


def scrub_response(response: ChatResponse, *secrets: str | None) -> ChatResponse:
    """``response`` with ``secrets`` scrubbed from every text the provider chose: the completion
    texts, the first-token alternatives and the model name (all of which a response cache stores)."""
    scrubber = scrubber_for(*secrets)
    if not scrubber:
        return response
    return dataclasses.replace(
        response,
        texts=[scrubber.scrub(text) for text in response.texts],
        first_token_top_logprobs=[
            [(scrubber.scrub(token), logprob) for token, logprob in top] for top in response.first_token_top_logprobs
        ],
        model=scrubber.scrub(response.model),
    )
