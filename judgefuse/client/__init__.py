"""The Python client of a judgefuse gateway: ``Client`` (blocking) and ``AsyncClient``.

``pip install judgefuse`` is enough for it (httpx and pydantic; the gateway's FastAPI, uvicorn
and Redis are the ``service`` extra). Requests and answers are the server's own models
(:mod:`judgefuse.service.schemas`); every failure is a typed ``JudgefuseError``
(:mod:`judgefuse.client.errors`: never a pydantic, JSON or httpx exception); 429 and 503 are
retried after ``Retry-After`` within a deadline that covers the whole answer, and an answer's
body is capped (:mod:`judgefuse.client.retry`); a ``judge_pairs`` run stops with one
``GatewayDown`` when the gateway stops answering (its circuit breaker); each judge request
carries an id drawn by the client, so a retry never judges twice.

    from judgefuse.client import Client

    with Client("http://localhost:8000", api_key=None) as client:
        verdict = client.judge(question="2 + 2?", answer_a="4", answer_b="5")
        client.feedback(verdict.id, "A")

The user's guide is docs/python-client.md.
"""

from judgefuse.client.async_client import AsyncClient
from judgefuse.client.errors import (
    APIError,
    BadResponse,
    Conflict,
    ConnectionFailed,
    DeadlineExceeded,
    GatewayDown,
    InvalidRequest,
    JudgefuseError,
    NotFound,
    Overloaded,
    ResponseTooLarge,
    ServerError,
    TooLarge,
    Unauthorized,
    Unavailable,
)
from judgefuse.client.models import Record
from judgefuse.client.pairs import PairResult
from judgefuse.client.retry import CircuitBreaker, RetryPolicy
from judgefuse.client.sync_client import Client
from judgefuse.service.schemas import BatchResponse, LabelResult, VerdictOut

__all__ = [
    "APIError",
    "AsyncClient",
    "BadResponse",
    "BatchResponse",
    "CircuitBreaker",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "DeadlineExceeded",
    "GatewayDown",
    "InvalidRequest",
    "JudgefuseError",
    "LabelResult",
    "NotFound",
    "Overloaded",
    "PairResult",
    "Record",
    "ResponseTooLarge",
    "RetryPolicy",
    "ServerError",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "VerdictOut",
]
