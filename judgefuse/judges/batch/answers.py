"""Batch answers, kept on disk, and the chat client that serves judges from them.

A judge in a batch run is the online judge with one part swapped: its chat client
(:class:`AnsweringClient`) looks each request up among the batch answers instead of sending
it. A request with no answer yet is noted for the next batch and fails with
:class:`AwaitingBatch`; the item is judged again once its answers are in. So the prompts, the
parsing and the vote are exactly the online path's (the elicitation modes do not know), and the
same stub answers give the same votes online and in a batch.

Each answer is a line of ``{out}.batch-answers.jsonl`` (appended and fsynced as files are
downloaded), so a run that stops after a download never downloads or pays again; a line that
cannot be one of these is refused on load naming the file and line (:func:`_lines`):

* ``{"custom_id": ..., "status_code": 200, "body": {chat completion}}`` an answer;
* ``{"custom_id": ..., "status_code": 4xx/5xx, "body": {"error": ...}}`` a failed request;
* ``{"custom_id": ..., "error": {"code": ..., "message": ...}}`` a request the batch never ran
  (``batch_expired``, or the batch failed or was cancelled).

Anthropic's message batch results are read into the same records (:func:`anthropic_record`): a
succeeded message becomes the chat completion body it is online, an errored request its HTTP
status (:data:`ANTHROPIC_ERROR_STATUS`), an expired or canceled one a request never run.

A failed or never-run request fails its call with the transport error an online call would
have raised (the vote becomes invalid with the reason). With ``fallback`` set
(``--batch-retry-online``), a request that failed for a reason worth retrying (expired, never
run, a 5xx or 429) is sent online once; a request the provider refused (4xx) is not.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgefuse.json_input import MAX_DEPTH, JSONTextError, decode_utf8, parse_json, too_deep
from judgefuse.judges.batch.state import BatchFileError
from judgefuse.judges.transport import pricing
from judgefuse.judges.transport.cache import cache_key
from judgefuse.judges.transport.direct import parse_body
from judgefuse.judges.transport.errors import (
    JudgeTimeout,
    RetryableError,
    ServerError,
    TransportError,
    Unsupported,
    error_for_status,
    redact,
)
from judgefuse.judges.transport.redaction import scrub_response
from judgefuse.judges.transport.request import ChatClient, ChatRequest, ChatResponse, openai_body

__all__ = [
    "BATCH_PRICE_FACTOR",
    "AnswerStore",
    "anthropic_line",
    "anthropic_record",
    "anthropic_refusal",
    "AnsweringClient",
    "AwaitingBatch",
    "batch_line",
    "custom_id",
]

BATCH_PRICE_FACTOR = 0.5
"""Batch requests cost half the online price (OpenAI's and Anthropic's batch discount)."""


class AwaitingBatch(TransportError):
    """The request has no batch answer yet: it goes into the next batch."""


def custom_id(judge: str, request: ChatRequest) -> str:
    """The request's id inside a batch: 64 hex characters (OpenAI's limit), one per judge and
    answer-shaping request fields (the response cache's key), so a rerun asks the same ids."""
    return hashlib.sha256(f"{judge}\n{cache_key(request)}".encode()).hexdigest()


def batch_line(cid: str, request: ChatRequest, model: str) -> dict[str, Any]:
    """One line of a batch input file: the online request's body, sent as ``model``."""
    body = openai_body(request)
    body["model"] = model
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}


ANTHROPIC_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""The HTTP status Anthropic gives each error type online: an errored batch request fails
with the transport error the same online error would have raised."""
DEFAULT_ANTHROPIC_MAX_TOKENS = 4096
"""``max_tokens`` for a request that sets none (Anthropic requires it)."""


def anthropic_line(cid: str, request: ChatRequest, model: str) -> dict[str, Any]:
    """One request of a message batch: ``{custom_id, params}`` with the online request's
    messages (system messages joined into ``system``), temperature and ``max_tokens``. Called
    only for requests :func:`anthropic_refusal` lets through (one sample, no logprobs, no
    ``response_format``)."""
    system = "\n\n".join(str(m["content"]) for m in request.messages if m.get("role") == "system")
    params: dict[str, Any] = {
        "model": model.removeprefix("anthropic/"),
        "max_tokens": request.max_tokens or DEFAULT_ANTHROPIC_MAX_TOKENS,
        "messages": [{"role": m["role"], "content": m["content"]} for m in request.messages if m.get("role") != "system"],
        "temperature": request.temperature,
    }
    if system:
        params["system"] = system
    return {"custom_id": cid, "params": params}


def anthropic_refusal(request: ChatRequest) -> TransportError | None:
    """What Anthropic's Messages API cannot take, refused before the request is batched, with
    the error that makes the judge fall back as online: several samples (MP then asks one
    sample per request), logprobs (the logprob mode falls back to its ``fallback_mode``),
    ``response_format`` (structured output falls back to prompt and parse)."""
    if request.n > 1:
        return Unsupported(f"Anthropic messages take one sample per request (n={request.n})", feature="n", status=400)
    if request.logprobs:
        return Unsupported("Anthropic messages have no logprobs", feature="logprobs", status=400)
    if "response_format" in request.extra:
        return Unsupported("Anthropic message batches take no response_format", feature="response_format", status=400)
    return None


def anthropic_record(cid: str, result: Any) -> dict[str, Any]:
    """One result line of a message batch as an answer record (module docstring): a succeeded
    message as the chat completion it is online (text, stop reason, tokens), an errored request
    as its HTTP status and error, a canceled or expired one as never run."""
    kind = result.get("type") if isinstance(result, dict) else None
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        message = result["message"]
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        text = "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        usage = message.get("usage") if isinstance(message.get("usage"), dict) else {}
        body = {
            "model": message.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": message.get("stop_reason")}],
            "usage": {"prompt_tokens": int(usage.get("input_tokens") or 0),
                      "completion_tokens": int(usage.get("output_tokens") or 0)},
        }  # fmt: skip
        return {"custom_id": cid, "status_code": 200, "body": body}
    if kind == "errored":
        outer: dict[str, Any] = result["error"] if isinstance(result.get("error"), dict) else {}
        error: dict[str, Any] = outer["error"] if isinstance(outer.get("error"), dict) else outer
        status = ANTHROPIC_ERROR_STATUS.get(str(error.get("type")), 500)
        return {"custom_id": cid, "status_code": status,
                "body": {"error": {"message": str(error.get("message") or error.get("type") or ""),
                                   "type": error.get("type")}}}  # fmt: skip
    code = "batch_expired" if kind == "expired" else "batch_cancelled" if kind == "canceled" else "batch_error"
    return {"custom_id": cid, "error": {"code": code, "message": f"the message batch {kind or 'gave no result'} for it"}}


def _answer_records(raw: bytes) -> Iterable[dict[str, Any]]:
    """The answer records of an output or error file's lines, or of a message batch's results
    (module docstring)."""
    for text in raw.decode("utf-8", "replace").splitlines():
        if not text.strip():
            continue
        try:
            line = parse_json(text)
        except JSONTextError:
            continue  # a torn (or too deeply nested) line names no request; its request stays unanswered
        cid = line.get("custom_id") if isinstance(line, dict) else None
        if not isinstance(cid, str):
            continue
        if "result" in line:
            yield anthropic_record(cid, line["result"])
            continue
        response = line.get("response")
        if isinstance(response, dict) and isinstance(response.get("status_code"), int):
            yield {"custom_id": cid, "status_code": response["status_code"], "body": response.get("body")}
        else:
            error = line.get("error") if isinstance(line.get("error"), dict) else {}
            yield {"custom_id": cid, "error": {"code": str(error.get("code") or "batch_error"),
                                               "message": str(error.get("message") or "")}}  # fmt: skip


@dataclass
class AnswerStore:
    """Every batch answer of a run (custom id -> record), kept in an append-only JSONL file."""

    path: Path
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> AnswerStore:
        store = cls(path)
        if path.exists():
            for record in _lines(path, path.read_bytes()):
                store.records[record["custom_id"]] = record
        return store

    def __contains__(self, cid: str) -> bool:
        return cid in self.records

    def add_file(self, raw: bytes) -> int:
        """Keep the answers of a downloaded output or error file; how many were new."""
        return self.add(list(_answer_records(raw)))

    def add_missing(self, cids: Iterable[str], code: str, message: str) -> int:
        """Requests a finished batch never answered: each fails with ``code``."""
        return self.add([{"custom_id": c, "error": {"code": code, "message": message}} for c in cids if c not in self])

    def add(self, records: list[dict[str, Any]]) -> int:
        fresh = [r for r in records if r["custom_id"] not in self.records]
        if not fresh:
            return 0
        with self.path.open("ab") as handle:
            for record in fresh:
                handle.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
                self.records[record["custom_id"]] = record
            handle.flush()
            os.fsync(handle.fileno())
        return len(fresh)

    def failures(self) -> int:
        """Requests whose answer is an error (failed, expired or never run)."""
        return sum(1 for r in self.records.values() if r.get("status_code") != 200)


_ANSWERS_START_OVER = "every request it answered is asked (and paid for) again"


def _lines(path: Path, raw: bytes) -> Iterable[dict[str, Any]]:
    """The records of the answers file. A line that is not UTF-8 or not JSON is the torn tail
    of an interrupted append (skipped: that answer is fetched again); a JSON line our writer
    cannot have written (nested past the bound, or not an answer record of the module
    docstring) is a corrupted file: a BatchFileError naming the line, before any request goes
    out, rather than a KeyError halfway through the run."""
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = decode_utf8(line)
        except JSONTextError:
            continue  # a torn multi-byte character
        if not text.strip():
            continue
        if too_deep(text):
            raise BatchFileError(path, f"line {number}: nested deeper than {MAX_DEPTH} levels of arrays and objects",
                                 _ANSWERS_START_OVER)
        try:
            record = json.loads(text)
        except ValueError:
            continue  # the torn tail of an interrupted append
        problem = _record_problem(record)
        if problem is not None:
            raise BatchFileError(path, f"line {number}: not an answer record: {problem}", _ANSWERS_START_OVER)
        yield record


def _record_problem(record: Any) -> str | None:
    """What makes ``record`` something :meth:`AnswerStore.add` never writes (None: nothing)."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    if not isinstance(record.get("custom_id"), str):
        return "no custom_id string"
    status = record.get("status_code")
    if "status_code" in record:
        return None if isinstance(status, int) and not isinstance(status, bool) else "status_code is not an integer"
    error = record.get("error")
    if not (isinstance(error, dict) and isinstance(error.get("code"), str) and isinstance(error.get("message"), str)):
        return "neither a status_code nor an error with a code and a message"
    return None


def _failure(record: dict[str, Any], secret: str | None) -> TransportError:
    """The transport error an online call would have raised for a failed batch request."""
    if "error" in record and "status_code" not in record:
        error = record["error"]
        message = f"batch request {error['code']}: {redact(error['message'], secret)}".rstrip(": ")
        return JudgeTimeout(message) if error["code"] == "batch_expired" else ServerError(message)
    body = record.get("body")
    error = body.get("error") if isinstance(body, dict) else None
    detail = str(error.get("message", "")) if isinstance(error, dict) else str(body)
    param = error.get("param") if isinstance(error, dict) else None
    return error_for_status(int(record["status_code"]), redact(detail, secret), param=param)


class AnsweringClient:
    """A :class:`ChatClient` answering one judge's requests from an :class:`AnswerStore`.

    ``pending`` collects (custom id -> request) the requests that had no answer; ``misses``
    counts them (a caller compares it before and after an item). ``fallback`` (None: none) is
    the online client a failed request is retried on (once per request and run); ``refuse``
    (None: nothing) names the requests the provider's batches cannot take, failed at once with
    the error it returns (:func:`anthropic_refusal`).
    """

    def __init__(
        self,
        judge: str,
        store: AnswerStore,
        *,
        secret: str | None = None,
        fallback: ChatClient | None = None,
        refuse: Callable[[ChatRequest], TransportError | None] | None = None,
    ) -> None:
        self.judge = judge
        self._refuse = refuse
        self.store = store
        self.pending: dict[str, ChatRequest] = {}
        self.misses = 0
        self.retried_online = 0
        self._secret = secret
        self._fallback = fallback
        self._online_outcomes: dict[str, ChatResponse | TransportError] = {}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        refused = self._refuse(request) if self._refuse is not None else None
        if refused is not None:
            raise refused  # what the provider cannot take is never batched
        cid = custom_id(self.judge, request)
        record = self.store.records.get(cid)
        if record is None:
            self.misses += 1
            self.pending.setdefault(cid, request)
            raise AwaitingBatch(f"request {cid[:12]} is waiting for its batch")
        if record.get("status_code") != 200:
            failure = _failure(record, self._secret)
            if self._fallback is None or not isinstance(failure, RetryableError):
                raise failure  # a request the provider refused (4xx) would be refused online too
            return await self._online(cid, request)
        texts, tops, prompt_tokens, completion_tokens, model = parse_body(record.get("body"), request)
        cost = pricing.cost_usd(request.model, prompt_tokens, completion_tokens) * BATCH_PRICE_FACTOR
        answer = ChatResponse(
            texts=texts,
            first_token_top_logprobs=tops,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=0.0,
            cost_usd=cost,
            model=model,
        )
        return scrub_response(answer, self._secret)

    async def _online(self, cid: str, request: ChatRequest) -> ChatResponse:
        """The request sent online once; the outcome is kept, since an item waiting for another
        of its requests is judged again next round and must not pay twice."""
        kept = self._online_outcomes.get(cid)
        if kept is None:
            assert self._fallback is not None
            self.retried_online += 1
            try:
                kept = await self._fallback.complete(request)
            except TransportError as exc:
                kept = exc
            self._online_outcomes[cid] = kept
        if isinstance(kept, TransportError):
            raise kept
        return kept

    async def aclose(self) -> None:
        if self._fallback is not None:
            await self._fallback.aclose()
