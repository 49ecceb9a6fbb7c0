"""The LLM fuser in the offline evaluation: ``judgefuse eval DATA --fuser PANEL_OR_MODEL``.

The fuser ("Overconfidence in LLM-as-a-Judge", section 5; docs/design.md, 'Fusion') is the one
fusion method that calls a model, so replaying recorded votes cannot run it alone. Here it reads
each labelled item and the judges' recorded answers (choice, confidence and critique), and its
answers are **recorded** in a votes file (one :class:`JudgedItem` per line, holding the item
and the fuser's answer as one vote) written as each item finishes:

* a rerun reads the file and calls the model only for the items not in it (resume; a
  re-evaluation with every item recorded never calls the model);
* each recorded answer carries a digest of the judges' votes it read; a recorded answer over
  other votes than the current ones is refused (:class:`FuserEvalError`), never silently reused;
* a reply the fuser gave but that holds no usable verdict is recorded as an invalid vote with
  its reason; the fuser's row then takes the method's fallback verdict (majority over the
  judges), as the service does, and the run counts those fallbacks;
* a call that **failed** (the model unreachable, a timeout: no reply at all) is not an answer,
  so it is never recorded: the next run asks again. The run counts those failures, and
  ``eval`` gives no fuser row and exits 1 when there is any (:mod:`fuser_eval_command`).
  Recorded as an unusable answer, a failure would make an unreachable model's fuser row the
  fallback on every item (majority's accuracy, shown as the fuser's), and a rerun would reuse
  the failures;
* calls, tokens and cost (litellm's price table; a local model costs 0) are on every recorded
  vote, so the row's cost column includes the fuser's calls.

The fuser is a panel file's ``fuser:`` entry (a local ``local:`` model is started here and
stopped after) or a litellm model string with ``--fuser-api-base``. Identical requests within
a run are answered by the judge's response cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgefuse.errors import InputError
from judgefuse.evaluation.loaders import VotesWriter, read_votes
from judgefuse.fusion import get_method
from judgefuse.fusion.capabilities import DEFAULT_VOTING_METHOD, ITEM_METHOD
from judgefuse.fusion.fuser import FuserCall, LLMFuser
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.config import JudgeConfig, PanelConfigError, load_panel_config
from judgefuse.judges.judge import Judge
from judgefuse.judges.types import JudgedItem, JudgeVote

__all__ = [
    "FUSER_ROW",
    "FuserEvalError",
    "FuserRunSummary",
    "fuser_config",
    "fuser_verdicts",
    "fuser_vote",
    "inputs_digest",
    "record_fuser_answers",
]

FUSER_ROW = ITEM_METHOD
"""The row name of the fuser in every report (it sits with the fusion methods)."""
FALLBACK = DEFAULT_VOTING_METHOD
"""The fuser's fallback method when its answer is unusable (the method's own default)."""
_DIGEST_NOTE = "inputs sha256:"


class FuserEvalError(InputError, ValueError):
    """The fuser cannot be built or its recorded answers do not match the data."""


def fuser_config(spec: str, *, api_base: str | None = None) -> JudgeConfig:
    """The fuser's model: a panel file's ``fuser:`` entry, or a litellm model string.

    The response cache is switched on either way (identical requests in one run are answered once).
    """
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        try:
            panel = load_panel_config(path)
        except PanelConfigError as exc:
            raise FuserEvalError(f"--fuser: {exc}") from None
        if panel.fuser is None:
            raise FuserEvalError(f"--fuser: the panel file {spec} has no 'fuser:' model entry")
        if api_base is not None:
            raise FuserEvalError("--fuser-api-base goes with a model string; a panel file names its own api_base")
        return panel.fuser.model_copy(update={"cache": True})
    return JudgeConfig(name=FUSER_ROW, model=spec, api_base=api_base, mode="sc", cache=True)


def inputs_digest(votes: Sequence[JudgeVote]) -> str:
    """A digest of what the fuser reads of the judges' votes (name, choice, confidence, text)."""
    material = [[v.judge, v.choice, v.confidence, v.explanation] for v in votes]
    return hashlib.sha256(json.dumps(material, separators=(",", ":")).encode()).hexdigest()[:16]


def fuser_vote(name: str, call: FuserCall, digest: str) -> JudgeVote:
    """The fuser's answer as a recorded vote; a fallback (unusable answer) is an invalid vote."""
    verdict, response = call.verdict, call.response
    usage: dict[str, Any] = {
        "calls": 1 if response is not None else 0,
        "prompt_tokens": response.prompt_tokens if response is not None else 0,
        "completion_tokens": response.completion_tokens if response is not None else 0,
        "cost_usd": response.cost_usd if response is not None else 0.0,
        "latency_s": verdict.timings.get("fuser_s", 0.0),
        "raw": response.texts[0] if response is not None and response.texts else "",
    }
    notes = [f"{_DIGEST_NOTE}{digest}"]
    if call.fell_back:
        return JudgeVote.invalid(name, "sc", verdict.notes[0], notes=[*notes, *verdict.notes], **usage)
    return JudgeVote(
        judge=name,
        mode="sc",
        choice=verdict.choice,
        confidence=verdict.confidence,
        p_a=verdict.p_a,
        explanation=verdict.explanation,
        notes=[*notes, *verdict.notes],
        **usage,
    )


def recorded_digest(vote: JudgeVote) -> str | None:
    """The inputs digest a recorded fuser answer was made from (None for a foreign file)."""
    for note in vote.notes:
        if note.startswith(_DIGEST_NOTE):
            return note[len(_DIGEST_NOTE) :]
    return None


def read_fuser_answers(path: Path) -> dict[str, JudgeVote]:
    """Recorded fuser answers by item id (an absent file: none)."""
    if not path.exists():
        return {}
    return {judged.item.id: judged.votes[0] for judged in read_votes(path) if judged.votes}


def check_recorded(items: Sequence[JudgedItem], recorded: dict[str, JudgeVote], path: Path) -> None:
    """Refuse answers recorded over other votes than ``items`` carry now."""
    for judged in items:
        vote = recorded.get(judged.item.id)
        if vote is None:
            continue
        digest = recorded_digest(vote)
        if digest is not None and digest != inputs_digest(judged.votes):
            raise FuserEvalError(
                f"{path}: the fuser's answer on item {judged.item.id!r} was recorded over other judges' votes "
                "than the data now holds; give another --fuser-votes file (or remove this one) to fuse again"
            )


@dataclass
class FuserRunSummary:
    """What recording the fuser's answers did and cost."""

    called: int = 0
    recorded_before: int = 0
    fallbacks: int = 0
    failed: int = 0
    """Calls that failed (no reply): not recorded, asked again by the next run."""
    first_failure: str = ""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0

    def add(self, vote: JudgeVote) -> None:
        self.called += 1
        self.fallbacks += not vote.valid
        self.calls += vote.calls
        self.prompt_tokens += vote.prompt_tokens
        self.completion_tokens += vote.completion_tokens
        self.cost_usd += vote.cost_usd

    def add_failure(self, reason: str) -> None:
        self.failed += 1
        self.first_failure = self.first_failure or reason

    def failure_line(self) -> str | None:
        """What failed, in words (None: nothing failed)."""
        if not self.failed:
            return None
        calls = "call" if self.failed == 1 else "calls"
        return (
            f"fuser: {self.failed} {calls} failed (no reply; first: {self.first_failure}); not recorded, "
            "so the next run asks again; no fuser row in this report"
        )

    def line(self) -> str:
        item_word = "item" if self.called == 1 else "items"
        return (
            f"fuser: {self.called} {item_word} fused in {self.wall_s:.1f} s ({self.recorded_before} recorded before, "
            f"not called again): {self.calls} {'call' if self.calls == 1 else 'calls'}, "
            f"{self.prompt_tokens + self.completion_tokens} tokens ({self.prompt_tokens} prompt + "
            f"{self.completion_tokens} completion), cost ${self.cost_usd:.6f}; "
            f"{self.fallbacks} unusable {'answer' if self.fallbacks == 1 else 'answers'} (fell back to {FALLBACK})"
        )


async def _start_judge(config: JudgeConfig) -> tuple[Judge, object | None]:
    judge = Judge.from_config(config)
    if config.local is None:
        await judge.start()
        return judge, None
    from judgefuse.judges.local import LocalServerError, ModelNotInstalledError

    try:
        server = config.local.build()
        await server.astart()
    except (LocalServerError, ModelNotInstalledError, FileNotFoundError) as exc:
        raise FuserEvalError(f"could not start the fuser's local model: {exc}") from exc
    await judge.start(api_base=server.base_url)
    return judge, server


async def record_fuser_answers(
    config: JudgeConfig,
    items: Sequence[JudgedItem],
    votes_path: Path,
    *,
    concurrency: int = 4,
    on_done: Callable[[], None] | None = None,
    summary: FuserRunSummary | None = None,
) -> tuple[dict[str, JudgeVote], FuserRunSummary]:
    """The fuser's answer on every item of ``items``: recorded ones read, the rest asked and appended.

    An item whose call failed has no answer in the result (nor in the file); ``summary.failed``
    counts them."""
    summary = summary if summary is not None else FuserRunSummary()
    recorded = read_fuser_answers(votes_path)
    check_recorded(items, recorded, votes_path)
    todo = [judged for judged in items if judged.item.id not in recorded]
    summary.recorded_before = len(items) - len(todo)
    if not todo:
        return recorded, summary
    started = time.perf_counter()
    judge, server = await _start_judge(config)
    fuser = LLMFuser(judge, fallback=FALLBACK)
    pending = iter(todo)
    try:
        with VotesWriter(votes_path) as writer:

            async def worker() -> None:
                for judged in pending:  # shared iterator: each item is taken by one worker
                    call = await fuser.afuse_call(judged.item, judged.votes)
                    if call.failed:
                        summary.add_failure(call.verdict.notes[0])
                        if on_done is not None:
                            on_done()
                        continue
                    vote = fuser_vote(config.name, call, inputs_digest(judged.votes))
                    writer.write(JudgedItem(item=judged.item, votes=[vote]))
                    recorded[judged.item.id] = vote
                    summary.add(vote)
                    if on_done is not None:
                        on_done()

            async with asyncio.TaskGroup() as group:
                for _ in range(max(1, min(concurrency, len(todo)))):
                    group.create_task(worker())
    finally:
        summary.wall_s = time.perf_counter() - started
        await fuser.aclose()
        if server is not None:
            await server.astop()  # type: ignore[attr-defined]
    return recorded, summary


def fuser_verdicts(items: Sequence[JudgedItem], recorded: dict[str, JudgeVote]) -> list[Verdict]:
    """The fuser row's verdicts, one per item: its recorded answer, or the fallback when unusable.

    Each verdict holds the judges' votes and the fuser's, so the row's calls and cost count both.
    """
    fallback = get_method(FALLBACK)
    verdicts: list[Verdict] = []
    for judged in items:
        vote = recorded.get(judged.item.id)
        if vote is None:
            raise FuserEvalError(f"no recorded fuser answer for item {judged.item.id!r}")
        n_valid = sum(1 for v in judged.votes if v.valid)
        votes = [*judged.votes, vote]
        if vote.valid:
            assert vote.choice is not None and vote.confidence is not None and vote.p_a is not None
            verdicts.append(
                Verdict(
                    choice=vote.choice,
                    confidence=vote.confidence,
                    p_a=vote.p_a,
                    method=FUSER_ROW,
                    votes=votes,
                    n_valid=n_valid,
                    n_invalid=len(judged.votes) - n_valid,
                    explanation=vote.explanation,
                )
            )
        else:
            verdict = fallback(judged.votes)
            notes = [vote.error or "fuser answer unusable", *verdict.notes]
            verdicts.append(verdict.model_copy(update={"method": FUSER_ROW, "votes": votes, "notes": notes}))
    return verdicts
