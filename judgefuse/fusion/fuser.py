"""LLM-as-a-Fuser ("Overconfidence in LLM-as-a-Judge", section 5; docs/design.md, 'Fusion'): a
model reads the item and every judge's verdict and returns one verdict in the SC JSON shape.

The fuser is the one fusion method that calls a model, and it does so through the same judge
machinery as the panel (a :class:`~judgefuse.judges.judge.Judge`: backend registry, retries,
concurrency cap, cache, secrets). It needs the item (the question and both answers), which the
synchronous :class:`~judgefuse.fusion.registry.FusionMethod` protocol (``__call__(votes)``) does
not carry, so:

* **use** :meth:`LLMFuser.afuse` ``(item, votes) -> Verdict`` (async);
* ``__call__(votes)`` raises :class:`FuserNeedsItem` with that advice (never a silent fallback);
* callers that iterate over every registered method (offline evaluation) can recognise it by
  ``requires_item = True`` and skip it or call ``afuse``.

Registered as ``"fuser"``: ``get_method("fuser", judge=<Judge | JudgeConfig>)`` or
``get_method("fuser", client=<ChatClient>, config=<JudgeConfig>)``; ``fallback`` names the
voting method used when the fuser's output cannot be used (default ``majority``).

Fallback: when the fuser call fails (transport error, timeout) or its reply has no usable choice
and confidence, the verdict is the fallback method's, with ``method="fuser"`` and a note
``"fuser output invalid: <reason>; fell back to majority"`` (or ``"fuser call failed: ..."``).
A verdict from the fuser itself has ``confidence`` = the fuser's confidence in its choice and
``p_a`` derived from it; ``timings["fuser_s"]`` is the call's wall time.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judgefuse.fusion.registry import FusionError, fusion_method, get_method
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.judge import Judge
from judgefuse.judges.modes import describe_error
from judgefuse.judges.transport.errors import TransportError
from judgefuse.judges.transport.request import ChatClient, ChatResponse
from judgefuse.judges.types import JudgeVote, PairwiseItem
from judgefuse.prompts import PromptRenderError, parse_judgment, render_fuser_messages

__all__ = ["FuserCall", "FuserNeedsItem", "LLMFuser"]


@dataclass(frozen=True)
class FuserCall:
    """One fuser call: its verdict and, when the model answered, the response (tokens, cost).

    ``fell_back`` is True whenever the verdict is the fallback method's (no call, a failed call,
    or an unusable reply). ``failed`` is True only when the call itself failed (a transport
    error, a timeout): the model gave no answer, so a record of answers must not keep this one
    as if it had (asked again, the model may well answer)."""

    verdict: Verdict
    response: ChatResponse | None = None
    fell_back: bool = True
    failed: bool = False


class FuserNeedsItem(FusionError, TypeError):
    """The fuser was called like a pure voting method; it needs ``await afuse(item, votes)``."""


@fusion_method("fuser")
class LLMFuser:
    """The fuser method; see the module docstring."""

    name = "fuser"
    requires_fit = False
    requires_item = True

    def __init__(
        self,
        judge: Judge | JudgeConfig | None = None,
        *,
        client: ChatClient | None = None,
        config: JudgeConfig | None = None,
        fallback: str = "majority",
    ) -> None:
        if isinstance(judge, JudgeConfig):
            if config is not None:
                raise ValueError("give the fuser's JudgeConfig once (judge= or config=)")
            judge = Judge.from_config(judge, client=client)
        elif judge is None:
            if config is None:
                raise ValueError(
                    "the fuser needs a model: get_method('fuser', judge=Judge|JudgeConfig) "
                    "or get_method('fuser', client=ChatClient, config=JudgeConfig)"
                )
            judge = Judge.from_config(config, client=client)
        elif client is not None or config is not None:
            raise ValueError("give either a Judge, or client= and config=, not both")
        self.judge = judge
        self.fallback_name = fallback
        self._fallback = get_method(fallback)  # an unknown name fails here, listing the known ones
        if getattr(self._fallback, "requires_item", False) or getattr(self._fallback, "requires_fit", False):
            raise ValueError(f"the fuser's fallback must be a voting method, not {fallback!r}")

    def __repr__(self) -> str:
        return f"LLMFuser(judge={self.judge!r}, fallback={self.fallback_name!r})"

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        raise FuserNeedsItem(
            "the 'fuser' method reads the item as well as the votes and calls a model: "
            "use 'await fuser.afuse(item, votes)' (FusionMethod.__call__(votes) cannot carry the item)"
        )

    async def aclose(self) -> None:
        """Close the fuser's client."""
        await self.judge.aclose()

    def _fallback_verdict(self, votes: Sequence[JudgeVote], note: str, timings: dict[str, float]) -> Verdict:
        verdict = self._fallback(votes)
        return verdict.model_copy(
            update={"method": self.name, "notes": [note, *verdict.notes], "timings": {**verdict.timings, **timings}}
        )

    async def afuse(self, item: PairwiseItem, votes: Sequence[JudgeVote], *, tenant: str | None = None) -> Verdict:
        """One fuser call over ``item`` and ``votes``; never raises on model failures. ``tenant``
        (None: anonymous) shares the fuser model's concurrency slots fairly, as for judges."""
        return (await self.afuse_call(item, votes, tenant=tenant)).verdict

    async def afuse_call(
        self, item: PairwiseItem, votes: Sequence[JudgeVote], *, tenant: str | None = None
    ) -> FuserCall:
        """:meth:`afuse`, with the call's usage: what an offline run records and bills."""
        votes = list(votes)
        n_valid = sum(1 for vote in votes if vote.valid)
        fallback = self.fallback_name
        try:
            messages = render_fuser_messages(
                question=item.question, answer_a=item.answer_a, answer_b=item.answer_b, judgments=votes
            )
        except PromptRenderError as exc:
            return FuserCall(self._fallback_verdict(votes, f"fuser not called: {exc}; fell back to {fallback}", {}))
        started = time.perf_counter()
        try:
            response = await self.judge.chat(messages, tenant=tenant, structured=True)
        except TransportError as exc:
            timings = {"fuser_s": time.perf_counter() - started}
            note = f"fuser call failed: {describe_error(exc)}; fell back to {fallback}"
            return FuserCall(self._fallback_verdict(votes, note, timings), failed=True)
        timings = {"fuser_s": time.perf_counter() - started}
        text = response.texts[0] if response.texts else ""
        parsed = parse_judgment(text)
        if parsed.choice is None or parsed.confidence is None:
            reason = parsed.error or "no usable verdict"
            note = f"fuser output invalid: {reason}; fell back to {fallback}"
            return FuserCall(self._fallback_verdict(votes, note, timings), response, fell_back=True)
        confidence, clamped = parsed.choice_confidence()
        assert confidence is not None
        p_a = confidence if parsed.choice == "A" else 1.0 - confidence
        fields: dict[str, Any] = {
            "choice": parsed.choice,
            "confidence": confidence,
            "p_a": p_a,
            "method": self.name,
            "votes": votes,
            "n_valid": n_valid,
            "n_invalid": len(votes) - n_valid,
            "explanation": parsed.explanation,
            "notes": [*parsed.notes, *([clamped] if clamped else [])],
            "timings": timings,
        }
        return FuserCall(Verdict(**fields), response, fell_back=False)
