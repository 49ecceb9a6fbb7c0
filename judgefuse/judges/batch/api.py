"""The provider batch APIs over HTTP: OpenAI's (upload an input file, create a batch, poll it,
download results) and Anthropic's message batches (:class:`AnthropicBatchAPI`, below).

Spoken with aiohttp, as the direct chat client speaks chat completions (docs/design.md,
'Serving'), so the same code drives OpenAI, any OpenAI-compatible endpoint that serves
``/files`` and ``/batches``, and the test stub on loopback:

* ``POST {api_base}/files`` (multipart: ``file``, ``purpose=batch``) -> a file id;
* ``POST {api_base}/batches`` (``input_file_id``, ``endpoint``, ``completion_window``) -> a batch;
* ``GET {api_base}/batches/{id}`` -> its status and request counts;
* ``GET {api_base}/files/{id}/content`` -> the output or error file (JSONL).

A failure of these endpoints is a :class:`BatchAPIError` (its message redacted of the key): the
run cannot go on without them, unlike a failed request *inside* a batch, which only degrades
its vote. Both APIs share their session, calls and errors (``_BatchHTTP``) and are polled by
the same loop (:func:`judgefuse.judges.batch.polling.poll_until_ended`), each with its own
terminal statuses.
"""

from __future__ import annotations

import abc
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr

from judgefuse.errors import JudgefuseError
from judgefuse.json_input import decode_utf8, parse_json
from judgefuse.judges.transport.errors import redact

__all__ = [
    "ANTHROPIC_API_BASE",
    "ANTHROPIC_TERMINAL_STATUSES",
    "ANTHROPIC_VERSION",
    "OPENAI_TERMINAL_STATUSES",
    "TERMINAL_STATUSES",
    "AnthropicBatchAPI",
    "BatchAPIError",
    "BatchStatus",
    "OpenAIBatchAPI",
]

OPENAI_TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})
"""An OpenAI batch's statuses after which it changes no more (its files, if any, are final)."""
ANTHROPIC_TERMINAL_STATUSES = frozenset({"ended"})
"""A message batch's only final ``processing_status``."""
TERMINAL_STATUSES = OPENAI_TERMINAL_STATUSES | ANTHROPIC_TERMINAL_STATUSES
"""Either provider's final statuses (:attr:`BatchStatus.finished`)."""
ANTHROPIC_API_BASE = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with every Anthropic call."""

CHAT_ENDPOINT = "/v1/chat/completions"


class BatchAPIError(JudgefuseError):
    """The provider's files or batches endpoint failed (the HTTP status and its message).

    ``transient`` is True for what may pass on its own (a 5xx, a 429, a broken connection or a
    timeout): a poll retries those before giving up."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """What ``GET /batches/{id}`` says of one batch."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_json(cls, data: Any) -> BatchStatus:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise BatchAPIError(f"not a batch object: {str(data)[:120]!r}")
        counts = data.get("request_counts") or {}
        return cls(
            id=data["id"],
            status=str(data.get("status", "")),
            total=int(counts.get("total") or 0),
            completed=int(counts.get("completed") or 0),
            failed=int(counts.get("failed") or 0),
            output_file_id=data.get("output_file_id") or None,
            error_file_id=data.get("error_file_id") or None,
        )


class _BatchHTTP(abc.ABC):
    """What both batch APIs share: an aiohttp session against ``api_base`` with the provider's
    auth headers (:meth:`_headers`), and calls whose failures are :class:`BatchAPIError` with the
    key redacted. ``terminal_statuses`` are the provider's statuses after which a batch changes
    no more (what :func:`~judgefuse.judges.batch.polling.poll_until_ended` waits for)."""

    terminal_statuses: frozenset[str] = TERMINAL_STATUSES

    def __init__(self, api_base: str, api_key: SecretStr | None, *, timeout_s: float) -> None:
        self.api_base = api_base
        self._api_key = api_key
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(api_base={self.api_base!r})"

    @abc.abstractmethod
    def _headers(self, secret: str | None) -> dict[str, str]:
        """The headers every call carries (the key among them when there is one)."""

    def _secret(self) -> str | None:
        return self._api_key.get_secret_value() if self._api_key is not None else None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._headers(self._secret()), timeout=self._timeout)
        return self._session

    async def _call(self, method: str, path: str, **kwargs: Any) -> bytes:
        """``method path`` on ``api_base``: the answer's bytes, or a :class:`BatchAPIError`
        (``transient`` for a 5xx, a 429, a broken connection or a timeout)."""
        secret = self._secret()
        try:
            async with self._get_session().request(method, f"{self.api_base}{path}", **kwargs) as response:
                raw = await response.read()
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            detail = redact(str(exc), secret)
            raise BatchAPIError(f"{method} {path}: {type(exc).__name__}: {detail}", transient=True) from exc
        if status >= 300:
            detail = redact(raw.decode("utf-8", "replace"), secret)
            raise BatchAPIError(f"{method} {path}: HTTP {status}: {detail}", transient=status >= 500 or status == 429)
        return raw

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        raw = await self._call(method, path, **kwargs)
        try:
            return parse_json(decode_utf8(raw))
        except ValueError as exc:  # JSONTextError: not UTF-8, not JSON, or nested past the bound
            raise BatchAPIError(f"{method} {path}: the answer is not JSON") from exc

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


class OpenAIBatchAPI(_BatchHTTP):
    """The four calls of the module docstring against one ``api_base``; call :meth:`aclose`."""

    terminal_statuses = OPENAI_TERMINAL_STATUSES

    def __init__(self, api_base: str, api_key: SecretStr | None = None, *, timeout_s: float = 120.0) -> None:
        super().__init__(api_base.rstrip("/"), api_key, timeout_s=timeout_s)

    def _headers(self, secret: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"} if secret else {}

    async def upload(self, data: bytes, filename: str = "judgefuse-batch.jsonl") -> str:
        """Upload a batch input file; its id."""
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", io.BytesIO(data), filename=filename, content_type="application/jsonl")
        answer = await self._json("POST", "/files", data=form)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
            raise BatchAPIError(f"POST /files: no file id in {str(answer)[:120]!r}")
        return str(answer["id"])

    async def create(self, input_file_id: str) -> BatchStatus:
        """Start a batch over an uploaded file (24 h window, chat completions)."""
        body = {"input_file_id": input_file_id, "endpoint": CHAT_ENDPOINT, "completion_window": "24h"}
        return BatchStatus.from_json(await self._json("POST", "/batches", json=body))

    async def retrieve(self, batch_id: str) -> BatchStatus:
        return BatchStatus.from_json(await self._json("GET", f"/batches/{batch_id}"))

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (an output or error file: JSONL)."""
        return await self._call("GET", f"/files/{file_id}/content")


class AnthropicBatchAPI(_BatchHTTP):
    """Anthropic's Message Batches API, behind the same four calls as :class:`OpenAIBatchAPI`.

    Anthropic takes the requests in the create call itself (``POST /v1/messages/batches`` with
    ``requests: [{custom_id, params}]``) and has no files endpoint. So :meth:`upload` keeps the
    request lines in a local file in ``spool`` (the run's folder) and names it; :meth:`create`
    reads it and posts it. A run interrupted between the two finds the file and creates then,
    as the OpenAI path does with its uploaded file. ``GET /v1/messages/batches/{id}`` reports
    ``processing_status`` (``in_progress``, ``canceling``, ``ended``) and ``request_counts``;
    once ended, ``results_url`` serves one JSONL line per request, ``{custom_id, result: {type:
    succeeded | errored | canceled | expired, ...}}``, read by
    :func:`judgefuse.judges.batch.answers.anthropic_record`. The key goes in ``x-api-key`` and
    only to ``api_base``'s origin: a ``results_url`` elsewhere is refused, not followed.
    """

    terminal_statuses = ANTHROPIC_TERMINAL_STATUSES

    def __init__(
        self, api_base: str, api_key: SecretStr | None = None, *, spool: Path, timeout_s: float = 120.0
    ) -> None:
        super().__init__(api_base.rstrip("/").removesuffix("/v1"), api_key, timeout_s=timeout_s)
        self.spool = spool

    def _headers(self, secret: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if secret:
            headers["x-api-key"] = secret
        return headers

    async def upload(self, data: bytes, filename: str = "judgefuse-batch.jsonl") -> str:
        """Keep the request lines (one ``{custom_id, params}`` per line) for :meth:`create`."""
        digest = hashlib.sha256(data).hexdigest()[:16]
        path = self.spool / f"{filename.removesuffix('.jsonl')}-anthropic-{digest}.jsonl"
        temporary = path.with_name(path.name + ".tmp")
        with temporary.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        return str(path)

    async def create(self, input_file_id: str) -> BatchStatus:
        path = Path(input_file_id)
        try:
            lines = [parse_json(decode_utf8(line)) for line in path.read_bytes().splitlines() if line.strip()]
        except (OSError, ValueError) as exc:
            raise BatchAPIError(f"the batch's request file {path} cannot be read: {exc}") from exc
        answer = await self._json("POST", "/v1/messages/batches", json={"requests": lines})
        status = anthropic_status(answer)
        path.unlink(missing_ok=True)  # the provider holds the requests now
        return status

    async def retrieve(self, batch_id: str) -> BatchStatus:
        return anthropic_status(await self._json("GET", f"/v1/messages/batches/{batch_id}"))

    async def content(self, file_id: str) -> bytes:
        """The results JSONL at ``results_url`` (``file_id``), on ``api_base``'s origin only."""
        if not file_id.startswith(self.api_base + "/"):
            raise BatchAPIError(
                f"results_url {file_id[:120]!r} is not on {self.api_base}: not sending the key there"
            )
        return await self._call("GET", file_id.removeprefix(self.api_base))


def anthropic_status(data: Any) -> BatchStatus:
    """A message batch object as a :class:`BatchStatus` (``ended`` is terminal; the results URL
    stands in the output file's place; errored, canceled and expired count as failed)."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise BatchAPIError(f"not a message batch object: {str(data)[:120]!r}")
    counts = data.get("request_counts") or {}

    def count(*names: str) -> int:
        return sum(int(counts.get(name) or 0) for name in names)

    return BatchStatus(
        id=data["id"],
        status=str(data.get("processing_status", "")),
        total=count("processing", "succeeded", "errored", "canceled", "expired"),
        completed=count("succeeded"),
        failed=count("errored", "canceled", "expired"),
        output_file_id=data.get("results_url") or None,
    )
