"""How a hostile provider might echo a key, and a detector for any readable piece of it.

Shared by the transport tests and the service test (loaded by path: test folders are not
packages). No tests here.
"""

from __future__ import annotations

import base64
import re
import urllib.parse


def encodings(secret: str) -> dict[str, str]:
    """The key as a hostile provider might echo it: verbatim and in the common encodings.

    Base64 is taken inside a longer blob (``user:<key>``-style, as in a Basic auth header) at
    each of the three byte alignments, with and without padding, in both alphabets.
    """
    raw = secret.encode()
    forms = {"verbatim": secret, "upper": secret.upper()}
    for prefix in (b"", b"u:", b"ab:"):
        for suffix in (b"", b"!", b"!?"):
            blob = prefix + raw + suffix
            tag = f"{len(prefix)}{len(suffix)}"
            forms[f"b64_{tag}"] = base64.b64encode(blob).decode()
            forms[f"b64_nopad_{tag}"] = base64.b64encode(blob).decode().rstrip("=")
            forms[f"b64url_{tag}"] = base64.urlsafe_b64encode(blob + b"\xfb\xff").decode()
            forms[f"b64url_nopad_{tag}"] = base64.urlsafe_b64encode(blob + b"\xfb\xff").decode().rstrip("=")
    forms["url_quote"] = urllib.parse.quote(secret, safe="")
    forms["url_every_byte"] = "".join(f"%{b:02X}" for b in raw)
    forms["url_every_byte_lower"] = "".join(f"%{b:02x}" for b in raw)
    forms["hex"] = raw.hex()
    forms["hex_upper"] = raw.hex().upper()
    forms["json_escapes"] = "".join(f"\\u{ord(c):04x}" for c in secret)
    return forms


def leaks(text: str, secret: str) -> list[str]:
    """What of ``secret`` is still readable in ``text``: any 8-char piece of it, verbatim or decoded.

    Decoding tries every base64 run (both alphabets, every alignment), percent-decoding and hex,
    so a test fails if any encoding of a key fragment survived.
    """
    found: list[str] = []
    pieces = {secret[i : i + 8].lower() for i in range(len(secret) - 7)}
    candidates = [
        text,
        urllib.parse.unquote(text),
        re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text),
    ]
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}", text):
        for shift in range(4):
            body = run[shift:]
            body = body[: len(body) - len(body) % 4]
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    candidates.append(decode(body).decode("latin-1"))
                except ValueError:
                    pass
    for run in re.findall(r"[0-9a-fA-F]{16,}", text):
        for shift in range(2):
            body = run[shift:]
            candidates.append(bytes.fromhex(body[: len(body) - len(body) % 2]).decode("latin-1"))
    for candidate in candidates:
        lowered = candidate.lower()
        found += [piece for piece in pieces if piece in lowered]
    return found
