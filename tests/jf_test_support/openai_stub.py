"""A scripted OpenAI-compatible chat-completions server on loopback, for tests and benchmarks.

Each POST to ``/v1/chat/completions`` takes the next scripted action from a queue (or asks
``handler(body)`` when the queue is empty and a handler is set, else uses ``default``):

* :class:`Reply`   a completion: texts (one per choice, cycled to ``n``), first-token top
                   logprobs, usage, an optional delay before answering;
* :class:`Status`  an error status with an OpenAI-shaped error body (and Retry-After);
* :class:`Hang`    never answer (until the server stops), to drive client timeouts;
* :class:`Close`   drop the connection without a response;
* :class:`Garbage` a 200 whose body is not JSON;
* :class:`Truncated` a 200 announcing a full completion's length that sends part of it and
                   then resets the connection.

:class:`FaultPlan` is a ready ``handler``: per request it picks a fault (timeout/hang, 429
with Retry-After, 500/502/503, connection reset, truncated body, garbage body) or a normal
answer at configured rates, deterministically from a seed (each judge draws from its own
seeded stream, so the n-th request of a judge gets the same fault in every run), and counts
what it injected.

Server-wide switches: ``reject_n`` (400 with ``param: "n"`` when ``n`` > 1, as providers
without multi-choice support do) and ``require_key`` (401 unless the Bearer token matches;
the error message echoes the offered key, as careless providers do, to test redaction).
Every request is recorded (body, headers, arrival time) before the action runs.

The OpenAI batch API is served too (``/v1/files`` upload and content, ``/v1/batches`` create
and retrieve; :class:`BatchStub`): each line of a batch's input file takes the next action
exactly as a chat request would, a :class:`Reply` becoming an output line and anything else an
error line. A batch advances one status per retrieve (``validating`` -> ``in_progress`` ->
``completed``); ``batches.hold`` keeps it in progress, ``batches.expire_after`` expires it
after that many lines (the rest go to the error file as ``batch_expired``).

Anthropic's Message Batches API is served as well (``POST /v1/messages/batches``, ``GET
/v1/messages/batches/{id}`` and its ``/results``; :class:`AnthropicBatchStub`, ``server.anthropic``),
with the same actions per request, plus the online ``POST /v1/messages``: each request's
``params`` are read as the chat body they stand for (``system`` first), so one handler answers
both APIs alike.

Run as a script it serves ``default`` replies until killed, printing ``READY <url>`` first:
the transport benchmark uses that to keep the server's CPU out of the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    texts: list[str] | str = "A"
    top_logprobs: list[tuple[str, float]] | None = None
    """The first output token's top-k; sent (for every choice) only when the request asked."""
    usage: tuple[int, int] | None = (12, 1)
    delay_s: float = 0.0
    model: str | None = None


@dataclass
class Status:
    status: int
    message: str = "scripted error"
    param: str | None = None
    retry_after: str | None = None


@dataclass
class Hang:
    seconds: float = 3600.0


@dataclass
class Close:
    pass


@dataclass
class Garbage:
    body: bytes = b"<html>502 bad gateway from some proxy"
    status: int = 200


@dataclass
class Truncated:
    """A 200 whose headers promise ``text``'s full completion but whose body stops part-way
    (``fraction`` of it) before the connection is reset."""

    texts: str = "A"
    fraction: float = 0.5


Action = Reply | Status | Hang | Close | Garbage | Truncated

#: The fault kinds :class:`FaultPlan` knows, and what each one injects.
FAULT_KINDS = ("timeout", "429", "500", "502", "503", "reset", "truncated", "garbage")


@dataclass
class FaultPlan:
    """A ``StubServer.handler`` injecting faults at configured rates, reproducibly.

    ``rates`` maps a fault kind (:data:`FAULT_KINDS`) to its probability per request (their sum
    at most 1); ``per_key`` overrides the rates for one key (the judge: by default the request's
    ``model``). What is not a fault is ``ok(body)`` (default: a plain ``Reply()``).
    ``retry_after`` are the Retry-After values a 429 sends (picked from the same stream);
    ``hang_s`` is how long a "timeout" hangs (longer than the client waits).

    Determinism: each key draws from its own ``random.Random(f"{seed}:{key}")``, so the
    sequence of faults one judge sees does not depend on how requests of different judges
    interleave. ``injected[key][kind]`` counts what was sent ("ok" included); ``healed``
    keys get ``ok`` only; :meth:`set_rates` changes a key's rates at run time; ``last_kind``
    is the kind of the latest request.
    """

    rates: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    per_key: dict[str, Mapping[str, float]] = field(default_factory=dict)
    ok: Callable[[dict[str, Any]], Action] | None = None
    retry_after: tuple[str | None, ...] = ("0",)
    hang_s: float = 5.0
    key: Callable[[dict[str, Any]], str] = field(default=lambda body: str(body.get("model", "")))
    injected: dict[str, Counter[str]] = field(default_factory=dict)
    healed: set[str] = field(default_factory=set)
    last_kind: str = ""
    """The kind the latest request got (for handlers that wrap the plan and log)."""
    _streams: dict[str, random.Random] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._check(self.rates)
        for rates in self.per_key.values():
            self._check(rates)

    @staticmethod
    def _check(rates: Mapping[str, float]) -> None:
        unknown = set(rates) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
        if any(rate < 0 for rate in rates.values()) or sum(rates.values()) > 1 + 1e-9:
            raise ValueError(f"fault rates must be >= 0 and sum to at most 1: {dict(rates)}")

    def set_rates(self, key: str, rates: Mapping[str, float]) -> None:
        self._check(rates)
        self.per_key[key] = rates

    def pick(self, key: str) -> str:
        """The next kind for ``key`` ("ok" or a fault kind), from its seeded stream."""
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = random.Random(f"{self.seed}:{key}")
        draw = stream.random()
        if key in self.healed:
            return "ok"
        rates = self.per_key.get(key, self.rates)
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += rates.get(kind, 0.0)
            if draw < edge:
                return kind
        return "ok"

    def __call__(self, body: dict[str, Any]) -> Action:
        key = self.key(body)
        kind = self.last_kind = self.pick(key)
        self.injected.setdefault(key, Counter())[kind] += 1
        good = self.ok(body) if self.ok is not None else Reply()
        if kind == "ok":
            return good
        if kind == "timeout":
            return Hang(self.hang_s)
        if kind == "429":
            after = self._streams[key].choice(self.retry_after)
            return Status(429, "rate limited (injected)", retry_after=after)
        if kind in ("500", "502", "503"):
            return Status(int(kind), f"server error {kind} (injected)")
        if kind == "reset":
            return Close()
        if kind == "truncated":
            text = good.texts if isinstance(good, Reply) and isinstance(good.texts, str) else "A"
            return Truncated(text)
        return Garbage()

    def totals(self) -> Counter[str]:
        """Injected kinds summed over every key."""
        total: Counter[str] = Counter()
        for counts in self.injected.values():
            total.update(counts)
        return total


@dataclass
class Recorded:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)


class StubServer:
    """The server; ``url`` is the api_base to give clients (``http://127.0.0.1:<port>/v1``)."""

    def __init__(self, *, default: Action | None = None) -> None:
        self.default: Action = default or Reply()
        self.handler: Callable[[dict[str, Any]], Action] | None = None
        self.reject_n = False
        self.require_key: str | None = None
        self.requests: list[Recorded] = []
        self.record = True
        self._queue: deque[Action] = deque()
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self._ids = itertools.count()
        self.url = ""
        self.batches = BatchStub(self)
        self.anthropic = AnthropicBatchStub(self)

    def script(self, *actions: Action) -> StubServer:
        """Queue actions for the next requests, in order."""
        self._queue.extend(actions)
        return self

    async def start(self, port: int = 0) -> StubServer:
        app = web.Application(client_max_size=256 * 1024 * 1024)  # batch input files are large
        app.router.add_post("/v1/chat/completions", self._handle)
        self.batches.add_routes(app)
        self.anthropic.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        sockets = self._runner.addresses
        self.url = f"http://127.0.0.1:{sockets[0][1]}/v1"
        return self

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(400, "body is not JSON")
        if self.record:
            self.requests.append(Recorded(body=body, headers=dict(request.headers)))
        if self.require_key is not None:
            offered = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if offered != self.require_key:
                return self._error(401, f"Incorrect API key provided: {offered}", code="invalid_api_key")
        n = int(body.get("n") or 1)
        if self.reject_n and n > 1:
            return self._error(400, "n not supported", param="n", code="unsupported_value")
        action = self.next_action(body)
        if isinstance(action, Status):
            headers = {"Retry-After": action.retry_after} if action.retry_after is not None else None
            return self._error(action.status, action.message, param=action.param, headers=headers)
        if isinstance(action, Hang):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=action.seconds)
            return self._error(504, "hang ended")
        if isinstance(action, Close):
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=200)
        if isinstance(action, Garbage):
            return web.Response(status=action.status, body=action.body, content_type="application/json")
        if isinstance(action, Truncated):
            return await self._truncated(request, action, body, n)
        if action.delay_s:
            await asyncio.sleep(action.delay_s)
        return web.Response(body=self._completion(action, body, n), content_type="application/json")

    def next_action(self, body: dict[str, Any]) -> Action:
        """The scripted queue first, then ``handler(body)``, then ``default``."""
        if self._queue:
            return self._queue.popleft()
        if self.handler is not None:
            return self.handler(body)
        return self.default

    async def _truncated(
        self, request: web.Request, action: Truncated, body: dict[str, Any], n: int
    ) -> web.StreamResponse:
        full = self._completion(Reply(texts=action.texts), body, n)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.content_length = len(full)
        await response.prepare(request)
        await response.write(full[: max(1, int(len(full) * action.fraction))])
        if request.transport is not None:
            request.transport.abort()
        return response

    def completion(self, reply: Reply, body: dict[str, Any]) -> bytes:
        """The chat-completion body ``reply`` makes for the request ``body``."""
        return self._completion(reply, body, int(body.get("n") or 1))

    def _completion(self, reply: Reply, body: dict[str, Any], n: int) -> bytes:
        texts = [reply.texts] if isinstance(reply.texts, str) else list(reply.texts)
        want_logprobs = bool(body.get("logprobs")) and reply.top_logprobs is not None
        choices = []
        for index, text in zip(range(n), itertools.cycle(texts)):
            choice: dict[str, Any] = {
                "index": index,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
            if want_logprobs and reply.top_logprobs is not None:
                k = int(body.get("top_logprobs") or 0)
                top = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in reply.top_logprobs[:k]]
                first_token, first_lp = reply.top_logprobs[0]
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": first_token,
                            "logprob": first_lp,
                            "bytes": list(first_token.encode()),
                            "top_logprobs": top,
                        }
                    ],
                    "refusal": None,
                }
            else:
                choice["logprobs"] = None
            choices.append(choice)
        data: dict[str, Any] = {
            "id": f"chatcmpl-stub{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model", "stub"),
            "choices": choices,
            "system_fingerprint": "fp_stub",
        }
        if reply.usage is not None:
            prompt, completion = reply.usage
            data["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return json.dumps(data).encode()

    @staticmethod
    def _error(
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
        return web.Response(
            status=status, body=json.dumps({"error": error}).encode(), content_type="application/json", headers=headers
        )


_TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass
class StubBatch:
    """One batch: its input lines, status, and (once finished) its output and error files."""

    id: str
    input_file_id: str
    lines: list[dict[str, Any]]
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    retrieves: int = 0

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "request_counts": {"total": len(self.lines), "completed": self.completed, "failed": self.failed},
        }


class _BatchEndpoints:
    """What both batch APIs' stubs share: the switches ``created`` (batches created so far),
    ``hold`` (keep every batch in progress) and ``expire_after`` (None: never; else the requests
    from that index on are not run), and how one request of a batch is answered: by the server's
    next action, exactly as the same request online."""

    def __init__(self, server: StubServer) -> None:
        self.server = server
        self.created = 0
        self.hold = False
        self.expire_after: int | None = None
        self._ids = itertools.count()

    def expires(self, index: int) -> bool:
        """Whether the batch's request at ``index`` runs out of time before it is run."""
        return self.expire_after is not None and index >= self.expire_after

    def answer(self, body: dict[str, Any]) -> tuple[int, Any, str | None]:
        """(200, the completion's JSON, None) for a chat ``body`` the next action answers, or
        (HTTP status, error message, the parameter it names) for one it fails."""
        action = self.server.next_action(body)
        if isinstance(action, Reply):
            return 200, json.loads(self.server.completion(action, body)), None
        if isinstance(action, Status):
            return action.status, action.message, action.param
        return 500, "server error", None


class BatchStub(_BatchEndpoints):
    """The files and batches endpoints of :class:`StubServer` (module docstring).

    ``files`` holds every uploaded or produced file (id -> bytes); ``created`` counts batch
    creations (a resumed run must not create a second batch); ``hold`` keeps every batch
    ``in_progress``; ``expire_after`` (None: never) ends a batch as ``expired`` after that many
    lines; ``fail_validation`` ends it as ``failed`` with no output file; ``failing_retrieves``
    answers that many retrieves with 503.
    """

    def __init__(self, server: StubServer) -> None:
        super().__init__(server)
        self.files: dict[str, bytes] = {}
        self.purposes: dict[str, str] = {}
        self.batches: dict[str, StubBatch] = {}
        self.fail_validation = False
        self.failing_retrieves = 0
        """The next this-many retrieves answer 503 (a provider's passing trouble)."""

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{file_id}/content", self._content)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches/{batch_id}", self._retrieve)

    def _new_file(self, data: bytes, purpose: str) -> str:
        file_id = f"file-stub{next(self._ids)}"
        self.files[file_id] = data
        self.purposes[file_id] = purpose
        return file_id

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if purpose != "batch" or not isinstance(upload, web.FileField):
            return StubServer._error(400, "expected multipart 'file' and purpose=batch", param="purpose")
        data = upload.file.read()
        file_id = self._new_file(data, "batch")
        return web.json_response({"id": file_id, "object": "file", "bytes": len(data), "purpose": "batch"})

    async def _content(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["file_id"])
        if data is None:
            return StubServer._error(404, "no such file")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        data = self.files.get(str(body.get("input_file_id")))
        if data is None:
            return StubServer._error(400, "input_file_id does not name an uploaded file", param="input_file_id")
        if body.get("endpoint") != "/v1/chat/completions":
            return StubServer._error(400, "only /v1/chat/completions is served", param="endpoint")
        lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        self.created += 1
        batch = StubBatch(id=f"batch_stub{next(self._ids)}", input_file_id=body["input_file_id"], lines=lines)
        self.batches[batch.id] = batch
        return web.json_response(batch.json())

    async def _retrieve(self, request: web.Request) -> web.Response:
        if self.failing_retrieves > 0:
            self.failing_retrieves -= 1
            return StubServer._error(503, "try again later")
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return StubServer._error(404, "no such batch")
        batch.retrieves += 1
        if batch.status == "validating":
            batch.status = "in_progress"
        elif batch.status == "in_progress" and not self.hold:
            self._finish(batch)
        return web.json_response(batch.json())

    def _finish(self, batch: StubBatch) -> None:
        if self.fail_validation:
            batch.status = "failed"
            return
        output: list[bytes] = []
        errors: list[bytes] = []
        expired = {"code": "batch_expired", "message": "not executed before the completion window expired"}
        for index, line in enumerate(batch.lines):
            custom_id = line.get("custom_id")
            if self.expires(index):
                errors.append(_result_line(index, custom_id, None, expired))
                continue
            status, answer, param = self.answer(line["body"])
            if status == 200:
                output.append(_result_line(index, custom_id, {"status_code": 200, "body": answer}, None))
                continue
            kind = "server_error" if status >= 500 else "invalid_request_error"
            response = {"status_code": status, "body": {"error": {"message": answer, "type": kind, "param": param}}}
            errors.append(_result_line(index, custom_id, response, None))
        batch.completed, batch.failed = len(output), len(errors)
        if output:
            batch.output_file_id = self._new_file(b"\n".join(output) + b"\n", "batch_output")
        if errors:
            batch.error_file_id = self._new_file(b"\n".join(errors) + b"\n", "batch_output")
        cut = self.expire_after is not None and self.expire_after < len(batch.lines)
        batch.status = "expired" if cut else "completed"


def _result_line(index: int, custom_id: Any, response: dict[str, Any] | None, error: dict[str, Any] | None) -> bytes:
    """One line of a batch's output or error file, as OpenAI writes it."""
    if response is not None:
        response = {**response, "request_id": f"req_{index}"}
    line = {"id": f"batch_req_{index}", "custom_id": custom_id, "response": response, "error": error}
    return json.dumps(line).encode()


ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         529: "overloaded_error"}  # fmt: skip


def _anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


@dataclass
class AnthropicStubBatch:
    id: str
    requests: list[dict[str, Any]]
    status: str = "in_progress"
    results: list[dict[str, Any]] = field(default_factory=list)
    retrieves: int = 0


class AnthropicBatchStub(_BatchEndpoints):
    """Anthropic's message batches and ``/v1/messages`` on :class:`StubServer` (module docstring).

    Every call needs the ``anthropic-version`` header (400 without) and, when the server has
    ``require_key``, that key in ``x-api-key`` (401). ``created``, ``hold`` and ``expire_after``
    work as :class:`BatchStub`'s; a batch ends on its second retrieve. ``headers`` records each
    call's headers."""

    def __init__(self, server: StubServer) -> None:
        super().__init__(server)
        self.batches: dict[str, AnthropicStubBatch] = {}
        self.headers: list[dict[str, str]] = []

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._message)
        app.router.add_post("/v1/messages/batches", self._create)
        app.router.add_get("/v1/messages/batches/{batch_id}", self._retrieve)
        app.router.add_get("/v1/messages/batches/{batch_id}/results", self._results)

    def _refused(self, request: web.Request) -> web.Response | None:
        self.headers.append(dict(request.headers))
        if not request.headers.get("anthropic-version"):
            return web.json_response(_anthropic_error(400, "anthropic-version header is required"), status=400)
        key = self.server.require_key
        if key is not None and request.headers.get("x-api-key") != key:
            return web.json_response(_anthropic_error(401, "invalid x-api-key"), status=401)
        return None

    @staticmethod
    def chat_body(params: dict[str, Any]) -> dict[str, Any]:
        """The chat-completions body a Messages ``params`` stands for (what handlers read)."""
        system = params.get("system")
        if isinstance(system, list):
            system = "".join(str(block.get("text", "")) for block in system if isinstance(block, dict))
        messages = [{"role": "system", "content": system}] if system else []
        for message in params.get("messages", []):
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            messages.append({"role": message.get("role"), "content": content})
        body = {"model": params.get("model"), "messages": messages, "max_tokens": params.get("max_tokens")}
        if "temperature" in params:
            body["temperature"] = params["temperature"]
        return body

    def _result(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, message or error object) for one request, by the server's next action."""
        status, answer, _param = self.answer(self.chat_body(params))
        if status == 200:
            text = answer["choices"][0]["message"]["content"]
            usage = answer.get("usage") or {}
            message = {
                "id": f"msg_stub{next(self._ids)}", "type": "message", "role": "assistant",
                "model": answer["model"], "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)},
            }  # fmt: skip
            return 200, message
        return status, _anthropic_error(status, answer)

    async def _message(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        params = await request.json()
        if self.server.record:
            self.server.requests.append(Recorded(body=params, headers=dict(request.headers)))
        status, answer = self._result(params)
        return web.json_response(answer, status=status)

    async def _create(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return web.json_response(_anthropic_error(400, "requests: at least one"), status=400)
        for entry in requests:
            params = entry.get("params") if isinstance(entry, dict) else None
            if not isinstance(entry.get("custom_id"), str) or not isinstance(params, dict) or not params.get("max_tokens"):
                return web.json_response(_anthropic_error(400, "each request needs custom_id and params with max_tokens"),
                                         status=400)  # fmt: skip
        self.created += 1
        batch = AnthropicStubBatch(id=f"msgbatch_stub{next(self._ids)}", requests=requests)
        self.batches[batch.id] = batch
        return web.json_response(self._json(batch, request))

    def _json(self, batch: AnthropicStubBatch, request: web.Request) -> dict[str, Any]:
        kinds = Counter(result["result"]["type"] for result in batch.results)
        ended = batch.status == "ended"
        base = f"{request.scheme}://{request.host}"
        return {
            "id": batch.id, "type": "message_batch", "processing_status": batch.status,
            "request_counts": {"processing": 0 if ended else len(batch.requests), "succeeded": kinds["succeeded"],
                               "errored": kinds["errored"], "canceled": kinds["canceled"], "expired": kinds["expired"]},
            "results_url": f"{base}/v1/messages/batches/{batch.id}/results" if ended else None,
        }  # fmt: skip

    async def _retrieve(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return web.json_response(_anthropic_error(404, "no such batch"), status=404)
        batch.retrieves += 1
        if batch.status == "in_progress" and batch.retrieves > 1 and not self.hold:
            self._finish(batch)
        return web.json_response(self._json(batch, request))

    def _finish(self, batch: AnthropicStubBatch) -> None:
        for index, entry in enumerate(batch.requests):
            result: dict[str, Any]
            if self.expires(index):
                result = {"type": "expired"}
            else:
                status, answer = self._result(entry["params"])
                result = {"type": "succeeded", "message": answer} if status == 200 else {"type": "errored", "error": answer}
            batch.results.append({"custom_id": entry["custom_id"], "result": result})
        batch.status = "ended"

    async def _results(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None or batch.status != "ended":
            return web.json_response(_anthropic_error(404, "no results for this batch"), status=404)
        lines = [json.dumps(result).encode() for result in reversed(batch.results)]  # any order, as documented
        return web.Response(body=b"\n".join(lines) + b"\n", content_type="application/binary")


async def _serve_forever(port: int) -> None:
    server = StubServer()
    server.record = False
    await server.start(port)
    print(f"READY {server.url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(args.port))


if __name__ == "__main__":
    main()
