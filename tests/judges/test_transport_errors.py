"""The error tree, the status table, Retry-After parsing, request validation and pricing."""

from __future__ import annotations

from datetime import UTC

import pytest

from judgefuse.judges.transport import (
    AuthenticationFailed,
    BadRequest,
    ChatRequest,
    ConnectionFailed,
    FatalError,
    JudgeTimeout,
    MalformedResponse,
    RateLimited,
    RetryableError,
    ServerError,
    TransportError,
    Unsupported,
    errors,
    pricing,
)


def test_retryable_and_fatal_are_disjoint_branches():
    retryable = [RateLimited, ServerError, JudgeTimeout, ConnectionFailed]
    fatal = [AuthenticationFailed, BadRequest, Unsupported, MalformedResponse]
    for cls in retryable:
        assert issubclass(cls, RetryableError) and not issubclass(cls, FatalError)
    for cls in fatal:
        assert issubclass(cls, FatalError) and not issubclass(cls, RetryableError)
    assert issubclass(RetryableError, TransportError) and issubclass(FatalError, TransportError)


def test_docstring_draws_every_public_error():
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert name in errors.__doc__


@pytest.mark.parametrize(
    ("status", "param", "expected"),
    [
        (400, None, BadRequest),
        (400, "n", Unsupported),
        (400, "logprobs", Unsupported),
        (401, None, AuthenticationFailed),
        (403, None, AuthenticationFailed),
        (404, None, BadRequest),
        (408, None, JudgeTimeout),
        (409, None, ServerError),
        (413, None, BadRequest),
        (422, None, BadRequest),
        (429, None, RateLimited),
        (500, None, ServerError),
        (502, None, ServerError),
        (503, None, ServerError),
        (529, None, ServerError),
    ],
)
def test_status_table(status, param, expected):
    error = errors.error_for_status(status, "detail", param=param)
    assert type(error) is expected
    assert error.status == status


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("", None),
        ("2", 2.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
    ],
)
def test_retry_after_parsing(header, seconds):
    assert errors.parse_retry_after(header) == seconds


def test_retry_after_http_date_in_the_future():
    from datetime import datetime, timedelta
    from email.utils import format_datetime

    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= errors.parse_retry_after(later) <= 31


def test_redact_removes_the_secret_and_truncates():
    text = errors.redact("key sk-1 in " + "x" * 1000, "sk-1")
    assert "sk-1" not in text and len(text) < 400


@pytest.mark.parametrize(
    "fields",
    [
        {"model": ""},
        {"messages": []},
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"n": 0},
        {"max_tokens": 0},
        {"top_logprobs": 5},
        {"logprobs": True, "top_logprobs": 21},
        {"timeout_s": 0.0},
        {"sample_index": -1},
    ],
)
def test_bad_requests_are_refused_up_front(fields):
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ValueError):
        ChatRequest(**{**base, **fields})


def test_known_model_is_priced_from_the_litellm_table():
    input_price, output_price = pricing.token_prices("gpt-4o-mini")
    assert input_price > 0 and output_price > 0
    assert pricing.token_prices("openai/gpt-4o-mini") == (input_price, output_price)
    assert pricing.cost_usd("gpt-4o-mini", 1000, 10) == pytest.approx(1000 * input_price + 10 * output_price)


def test_unknown_model_costs_nothing():
    assert pricing.cost_usd("my-local-llama", 1000, 1000) == 0.0


def _litellm_exceptions():
    from judgefuse.judges.transport.litellm_client import import_litellm

    litellm = import_litellm()
    common = {"message": "boom", "llm_provider": "anthropic", "model": "claude"}
    return [
        (litellm.AuthenticationError(**common), AuthenticationFailed),
        (litellm.PermissionDeniedError(**common, response=_response(403)), AuthenticationFailed),
        (litellm.NotFoundError(**common), BadRequest),
        (litellm.BadRequestError(**common), BadRequest),
        (litellm.ContextWindowExceededError(**common), BadRequest),
        (litellm.UnprocessableEntityError(**common, response=_response(422)), BadRequest),
        (litellm.RateLimitError(**common), RateLimited),
        (litellm.Timeout(**common), JudgeTimeout),
        (litellm.APIConnectionError(**common), ConnectionFailed),
        (litellm.InternalServerError(**common), ServerError),
        (litellm.BadGatewayError(**common), ServerError),
        (litellm.ServiceUnavailableError(**common), ServerError),
    ]


def _response(status: int):
    import httpx

    return httpx.Response(status_code=status, request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions"))


def test_every_litellm_exception_class_is_mapped():
    from judgefuse.judges.transport.litellm_client import map_litellm_error

    for exc, expected in _litellm_exceptions():
        mapped = map_litellm_error(exc, model="claude", timeout_s=1.0, secret=None)
        assert type(mapped) is expected, (type(exc).__name__, type(mapped).__name__)
