"""Render the judge and fuser prompts (Jinja2 templates shipped in ``templates/``) to chat messages.

Each template defines two blocks, ``system`` and ``user``; each becomes one chat message
(``{"role": ..., "content": ...}``), so the instructions live in the system message and the
untrusted item lives in the user message.

Untrusted text (the question, both answers, the judges' explanations) is placed in tagged
blocks under a note that the content is data, not instructions. Two layers keep it there:

* **Per-prompt nonce in the tag names** (``<output_a_3f9c1e0a7b2d>`` … ``</output_a_3f9c1e0a7b2d>``):
  no fixed string can close a block, because the closing tag is not known in advance. The nonce
  is ``HMAC-SHA256(key, every untrusted text of the prompt)``, cut to :data:`NONCE_HEX` hex
  digits, rather than fresh randomness, so that an identical request renders an identical prompt:
  the response cache (keyed by the prompt) and the render cache below keep hitting. It stays
  unforgeable because the key is secret and because the nonce depends on the very text that
  would have to contain it. The key is random per process unless ``JUDGEFUSE_PROMPT_NONCE_KEY``
  is set (read on first render) or :func:`set_nonce_key` is called: replicas that share a Redis
  response cache should share the key, or they will not hit each other's entries.
* **Defusal** (the ``data`` filter, :func:`~judgefuse.prompts.defuse.neutralise_tags`): any
  of our tag names after something that reads as ``<`` (zero-width characters, fullwidth and
  other compatibility forms, lookalike letters and brackets included) has that opener replaced
  by ``&lt;``, so ``</output_a>`` in an answer reads as ``&lt;/output_a>``; the text is otherwise
  unchanged. This also defuses any guess at a nonce tag (``</output_a_…``).

The Jinja environment uses ``StrictUndefined`` (a missing variable fails loudly, as
:class:`PromptRenderError`), no autoescaping (this is not HTML), and loads the templates from
the package's own files.

Styles: each judge mode ships in two, chosen per judge (``prompt_style`` in the panel YAML).
``delimited`` (the default, ``<mode>.j2``) fences the item in the nonce-tagged blocks above, under
the data note. ``plain`` (``<mode>_plain.j2``) gives the same instructions and reply format in a
few short sentences and heads the item with ``Instruction:`` / ``Output (a):`` / ``Output (b):``.
Small local models judged more consistently through the plain one (measured in
``benchmarks/results/README.md``), but it fences hostile text less well: its untrusted text still
goes through the ``data`` filter, yet nothing marks where an answer ends. Use it for local models
judging your own traffic, not for answers an adversary writes. The fuser has one style.

Speed (the gateway renders once per judge call): the environment does not re-check the template
files (``auto_reload=False``; they ship with the package), the compiled templates are held in a
dict, and :func:`render_messages` keeps a small LRU of rendered prompts keyed by (mode, question,
answers, extras), so the judges of one panel that share a mode render an item once. Each call
still returns fresh message dicts.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import jinja2

from judgefuse.errors import JudgefuseError
from judgefuse.prompts.defuse import BLOCK_TAGS, neutralise_tags

MODES: tuple[str, ...] = ("sc", "mp", "logprob", "fuser")
"""Template names. ``fuser`` also needs ``judgments``; see :func:`render_fuser_messages`."""

STYLES: tuple[str, ...] = ("delimited", "plain")
"""Prompt styles of the judge modes (module docstring: Styles); the first is the default."""

OPTIONAL_EXTRAS: frozenset[str] = frozenset({"rubric"})
"""Extra keyword variables a template may use (trusted operator text); anything else is refused."""

NONCE_HEX = 12
"""Hex digits of the per-prompt nonce in the tag names (48 bits)."""

NONCE_KEY_ENV = "JUDGEFUSE_PROMPT_NONCE_KEY"
"""Environment variable holding the nonce key (any string); read once, on first render."""

_nonce_key: bytes | None = None


class PromptRenderError(JudgefuseError, ValueError):
    """A template could not be rendered (unknown mode, missing or bad variable)."""


def set_nonce_key(key: bytes | str | None) -> None:
    """Use ``key`` for the tag nonces from now on (None: a fresh random key).

    Replicas sharing a response cache should share it (see the module docstring). Clears the
    render cache, whose prompts carry nonces made with the old key.
    """
    global _nonce_key
    if isinstance(key, str):
        key = key.encode("utf-8")
    if key is not None and len(key) < 16:
        raise ValueError("the prompt nonce key must be at least 16 bytes")
    _nonce_key = key if key is not None else secrets.token_bytes(32)
    _render_cached.cache_clear()


def _key() -> bytes:
    key = _nonce_key
    if key is None:
        set_nonce_key(os.environ.get(NONCE_KEY_ENV) or None)
        key = _nonce_key
    return key or b""


def block_tags(*untrusted: str) -> dict[str, str]:
    """The tag name of each block (``{"output_a": "output_a_3f9c1e0a7b2d", ...}``) for a prompt
    whose untrusted texts are ``untrusted`` (module docstring: the nonce)."""
    mac = hmac.new(_key(), digestmod=hashlib.sha256)
    for text in untrusted:
        encoded = text.encode("utf-8", "surrogatepass")
        mac.update(len(encoded).to_bytes(8, "big"))
        mac.update(encoded)
    nonce = mac.hexdigest()[:NONCE_HEX]
    return {tag: f"{tag}_{nonce}" for tag in BLOCK_TAGS}


def _data_filter(value: Any) -> str:
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined: raises UndefinedError naming the missing variable
    if not isinstance(value, str):
        raise PromptRenderError(f"untrusted template text must be str, got {type(value).__name__}")
    return neutralise_tags(value)


def _data_json_filter(value: Any) -> str:
    if isinstance(value, jinja2.Undefined):
        str(value)
    return neutralise_tags(json.dumps(value, ensure_ascii=False))


def _make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("judgefuse.prompts", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        auto_reload=False,  # the templates ship with the package: no stat() per render
    )
    env.filters["data"] = _data_filter
    env.filters["data_json"] = _data_json_filter
    return env


_ENV = _make_env()
_TEMPLATES: dict[str, jinja2.Template] = {}

RENDER_CACHE_SIZE = 128
"""Rendered prompts kept by :func:`render_messages` (the judges of one panel reuse them)."""

RENDER_CACHE_MAX_CHARS = 32_768
"""Items whose texts total more than this are rendered every time (bounds the cache's memory)."""


def _template(name: str) -> jinja2.Template:
    template = _TEMPLATES.get(name)
    if template is None:
        template = _TEMPLATES[name] = _ENV.get_template(f"{name}.j2")
    return template


_TRUSTED_VARIABLES = frozenset({"rubric", "tags"})


def _tags_for(variables: Mapping[str, Any]) -> dict[str, str]:
    """The nonce-carrying tag names for a prompt made of ``variables`` (their untrusted part)."""
    untrusted = []
    for name in sorted(set(variables) - _TRUSTED_VARIABLES):
        value = variables[name]
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        untrusted += [name, text]
    return block_tags(*untrusted)


def _render_blocks(name: str, variables: dict[str, Any]) -> list[dict[str, str]]:
    if "tags" not in variables:
        variables = {**variables, "tags": _tags_for(variables)}
    try:
        template = _template(name)
        messages = []
        for role in ("system", "user"):
            block = template.blocks[role]
            content = "".join(block(template.new_context(dict(variables)))).strip()
            messages.append({"role": role, "content": content})
    except jinja2.UndefinedError as exc:
        raise PromptRenderError(f"template {name}.j2: missing variable: {exc.message}") from exc
    except jinja2.TemplateError as exc:
        raise PromptRenderError(f"template {name}.j2 failed: {exc}") from exc
    return messages


def _check_text(**fields: Any) -> None:
    for key, value in fields.items():
        if not isinstance(value, str):
            raise PromptRenderError(f"{key} must be str, got {type(value).__name__}")


def _check_extra(extra: Mapping[str, Any]) -> None:
    unknown = sorted(set(extra) - OPTIONAL_EXTRAS)
    if unknown:
        raise PromptRenderError(
            f"unknown template variable(s) {unknown}; allowed extras: {sorted(OPTIONAL_EXTRAS)}"
        )
    for key, value in extra.items():
        if not isinstance(value, str):
            raise PromptRenderError(f"{key} must be str, got {type(value).__name__}")


def render_messages(
    mode: str, *, question: str, answer_a: str, answer_b: str, style: str = "delimited", **extra: Any
) -> list[dict[str, str]]:
    """The chat messages (system, user) for one judge call in ``mode``, in prompt ``style``.

    ``mode`` is one of ``"sc"``, ``"mp"``, ``"logprob"`` (or ``"fuser"``, which needs
    ``judgments=``; prefer :func:`render_fuser_messages`). ``extra`` may hold ``rubric``
    (trusted operator guidance). Raises :class:`PromptRenderError` (a ``ValueError``) on an
    unknown mode, an unknown extra, a non-str text field, or a variable the template lacks.
    """
    if mode not in MODES:
        raise PromptRenderError(f"unknown prompt mode {mode!r}; expected one of {list(MODES)}")
    if style not in STYLES:
        raise PromptRenderError(f"unknown prompt style {style!r}; expected one of {list(STYLES)}")
    if mode == "fuser":
        if "judgments" not in extra:
            raise PromptRenderError("mode 'fuser' needs judgments=[...]")
        judgments = extra.pop("judgments")
        return render_fuser_messages(
            question=question, answer_a=answer_a, answer_b=answer_b, judgments=judgments, **extra
        )
    _check_text(question=question, answer_a=answer_a, answer_b=answer_b)
    if extra:
        _check_extra(extra)
    extras = tuple(sorted(extra.items())) if extra else ()
    size = len(question) + len(answer_a) + len(answer_b) + sum(len(v) for _, v in extras)
    render = _render_cached if size <= RENDER_CACHE_MAX_CHARS else _render_uncached
    name = template_name(mode, style)
    return [{"role": role, "content": content} for role, content in render(name, question, answer_a, answer_b, extras)]


def template_name(mode: str, style: str = "delimited") -> str:
    """The template file (without ``.j2``) of a judge ``mode`` in ``style``."""
    return mode if style == "delimited" else f"{mode}_{style}"


def _render_uncached(
    mode: str, question: str, answer_a: str, answer_b: str, extras: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    messages = _render_blocks(
        mode, {"question": question, "answer_a": answer_a, "answer_b": answer_b, **dict(extras)}
    )
    return tuple((m["role"], m["content"]) for m in messages)


@lru_cache(maxsize=RENDER_CACHE_SIZE)
def _render_cached(
    mode: str, question: str, answer_a: str, answer_b: str, extras: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """The (role, content) pairs of one judge prompt; memoised (all arguments are str)."""
    return _render_uncached(mode, question, answer_a, answer_b, extras)


def _get(item: Any, *names: str) -> Any:
    for name in names:
        if isinstance(item, Mapping):
            if name in item:
                return item[name]
        elif hasattr(item, name):
            return getattr(item, name)
    return None


TIE_OUTPUT = "tie: judged the answers equal"
"""How the fuser prompt shows a tie vote (``JudgeVote.tie``, JudgeBench's ``A=B``): a judgment
that the outputs are equally good, which is evidence, unlike ``null`` (no usable answer)."""


def _judgment_record(index: int, item: Any) -> dict[str, Any]:
    """One judge's verdict in the SC JSON shape, for the fuser prompt: ``selected_output`` is
    ``Output (a)`` / ``Output (b)``, :data:`TIE_OUTPUT` for a tie vote (``tie`` true or choice
    ``"tie"``; docs/design.md, 'Fusion': a tie is a vote, not an abstention) or ``null`` for a
    judge that gave no usable answer."""
    name = _get(item, "judge", "name")
    if not isinstance(name, str) or not name:
        name = f"judge {index}"
    choice = _get(item, "choice")
    tie = _get(item, "tie") is True or choice == "tie"
    if tie:
        choice = None
    if choice not in ("A", "B", None):
        raise PromptRenderError(
            f"judgment {index}: choice must be 'A', 'B', 'tie' or None, got {choice!r}"
        )
    confidence = _get(item, "confidence")
    score: float | int | None = None
    if choice is not None and confidence is not None:
        if (
            isinstance(confidence, bool)
            or not isinstance(confidence, (int, float))
            or not math.isfinite(confidence)
            or not 0.0 <= confidence <= 1.0
        ):
            raise PromptRenderError(
                f"judgment {index}: confidence must be a number in [0, 1], got {confidence!r}"
            )
        score = round(float(confidence) * 100.0, 1)
        if score == int(score):
            score = int(score)
    explanation = _get(item, "explanation")
    if explanation is None:
        explanation = ""
    if not isinstance(explanation, str):
        raise PromptRenderError(f"judgment {index}: explanation must be str")
    return {
        "judge": name,
        "selected_output": TIE_OUTPUT if tie else {"A": "Output (a)", "B": "Output (b)", None: None}[choice],
        "confidence_score": score,
        "explanation": explanation,
    }


def render_fuser_messages(
    *,
    question: str,
    answer_a: str,
    answer_b: str,
    judgments: Sequence[Any],
    **extra: Any,
) -> list[dict[str, str]]:
    """The chat messages for the LLM-as-a-Fuser call.

    ``judgments``: one entry per judge, a mapping or an object with attributes ``judge`` (or
    ``name``), ``choice`` (``"A"``/``"B"``/``"tie"``/``None``), optionally ``tie`` (True: a tie
    vote), ``confidence`` (in [0, 1], the judge's confidence in its own choice, or ``None``) and
    ``explanation``. They are shown to the fuser in the SC output shape (``confidence_score`` on
    0-100; ``selected_output`` :data:`TIE_OUTPUT` for a tie vote, ``null`` for an abstaining judge).
    At least one judgment is required.
    """
    _check_text(question=question, answer_a=answer_a, answer_b=answer_b)
    _check_extra(extra)
    if isinstance(judgments, (str, bytes, Mapping)) or not isinstance(judgments, Sequence):
        raise PromptRenderError("judgments must be a sequence of judge verdicts")
    if not judgments:
        raise PromptRenderError("the fuser needs at least one judgment")
    records = [_judgment_record(i, item) for i, item in enumerate(judgments, start=1)]
    return _render_blocks(
        "fuser",
        {
            "question": question,
            "answer_a": answer_a,
            "answer_b": answer_b,
            "judgments": records,
            **extra,
        },
    )


def render_template(name: str, **variables: Any) -> list[dict[str, str]]:
    """Render one template file (``name`` without ``.j2``) with exactly ``variables``.

    A lower-level door for tests and custom use: no defaults and no checks beyond the
    template's own (StrictUndefined), so a missing variable raises :class:`PromptRenderError`.
    The block tag names (``tags``) are derived from the variables unless given.
    """
    known = [template_name(mode, style) for mode in MODES for style in STYLES if mode != "fuser" or style == STYLES[0]]
    if name not in known:
        raise PromptRenderError(f"unknown prompt template {name!r}; expected one of {known}")
    return _render_blocks(name, variables)
