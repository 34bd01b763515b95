"""Retry decisions, Retry-After parsing, backoff bounds and the retry loop (no real waits)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.errors import ConfigurationError, ProviderError, ProviderUnavailable
from worker.protection.retry import (
    GiveUp,
    RetryPolicy,
    TryAgain,
    backoff_delay,
    call_with_retry,
    classify,
    retry_after_seconds,
    wait_for,
)

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
URL = "http://127.0.0.1:9/v1/chat/completions"
WHAT = "the LLM endpoint"


def _status_error(
    status: int, headers: dict[str, str] | None = None, body: Any = None
) -> openai.APIStatusError:
    request = httpx2.Request("POST", URL)
    response = httpx2.Response(status, headers=headers or {}, request=request)
    kinds: dict[int, type[openai.APIStatusError]] = {
        400: openai.BadRequestError, 401: openai.AuthenticationError,
        403: openai.PermissionDeniedError, 404: openai.NotFoundError,
        409: openai.ConflictError, 422: openai.UnprocessableEntityError,
        429: openai.RateLimitError,
    }
    kind = kinds.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
    return kind(f"HTTP {status}", response=response, body=body)


def _timeout() -> openai.APITimeoutError:
    return openai.APITimeoutError(request=httpx2.Request("POST", URL))


def _connection() -> openai.APIConnectionError:
    return openai.APIConnectionError(request=httpx2.Request("POST", URL))


# ---------------------------------------------------------------- Retry-After


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, None),
    ({"Retry-After": "3"}, 3.0),
    ({"retry-after": "0.5"}, 0.5),
    ({"retry-after": " 7 "}, 7.0),
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the finer one wins
    ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
    ({"retry-after": format_datetime(NOW + timedelta(seconds=12), usegmt=True)}, 12.0),
    ({"retry-after": format_datetime(NOW - timedelta(seconds=12), usegmt=True)}, 0.0),
    ({"retry-after": "Sun, 22 Nov 2026 12:00:05"}, 5.0),  # no zone: GMT by definition
    ({"retry-after": "-4"}, None),
    ({"retry-after": "nan"}, None),
    ({"retry-after": "tomorrow-ish"}, None),
])
def test_retry_after_seconds(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers, NOW) == expected


# ---------------------------------------------------------------- backoff


@given(attempt=st.integers(1, 30), rand=st.floats(0, 1, exclude_max=True))
def test_backoff_is_bounded_and_never_zero(attempt: int, rand: float) -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=8.0)
    step = min(8.0, 0.5 * 2 ** (attempt - 1))
    delay = backoff_delay(attempt, policy, rand)
    assert step / 2 <= delay <= step


def test_backoff_grows_then_caps() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=4.0)
    assert [backoff_delay(n, policy, 0.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 2.0, 2.0]


def test_a_retry_after_is_honoured_jittered_upwards_and_capped() -> None:
    policy = RetryPolicy(retry_after_cap_s=30.0, retry_after_jitter=0.1)
    assert wait_for(TryAgain("HTTP 429", 2.0), 1, policy, 0.0) == 2.0
    assert 2.0 <= wait_for(TryAgain("HTTP 429", 2.0), 1, policy, 0.99) <= 2.2
    assert wait_for(TryAgain("HTTP 503", 3600.0), 1, policy, 0.0) == 30.0


# ---------------------------------------------------------------- classify


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_transient_statuses_are_retried(status: int) -> None:
    decision = classify(_status_error(status, {"retry-after": "4"}), WHAT, NOW)
    assert decision == TryAgain(f"HTTP {status}", 4.0)


def test_timeouts_and_connection_errors_are_retried() -> None:
    assert classify(_timeout(), WHAT, NOW) == TryAgain("timeout")
    assert classify(_connection(), WHAT, NOW) == TryAgain("connection error")


@pytest.mark.parametrize("status", [401, 403, 404])
def test_credentials_and_paths_are_configuration_errors(status: int) -> None:
    decision = classify(_status_error(status), WHAT, NOW)
    assert isinstance(decision, GiveUp)
    assert isinstance(decision.error, ConfigurationError)
    assert f"HTTP {status}" in str(decision.error)


def test_other_client_errors_give_up_without_quoting_the_body() -> None:
    body = {"message": "your text 'I am secretly ill' is too long", "code": "context_length",
            "param": "messages"}
    decision = classify(_status_error(422, body=body), WHAT, NOW)
    assert isinstance(decision, GiveUp)
    assert type(decision.error) is ProviderError
    assert "context_length" in str(decision.error)
    assert "secretly" not in str(decision.error)


def test_a_refused_response_format_says_how_to_fall_back() -> None:
    body = {"message": "json_schema unsupported", "param": "response_format"}
    decision = classify(_status_error(400, body=body), WHAT, NOW)
    assert isinstance(decision, GiveUp)
    assert "MEMFLEET_LLM_STRUCTURED_OUTPUT=json_object" in str(decision.error)


# ---------------------------------------------------------------- the loop


class Calls:
    """A call that fails with the given errors, then answers "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.count = 0

    async def __call__(self) -> str:
        self.count += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def _recorder() -> tuple[list[float], Callable[[float], Awaitable[None]]]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return waits, sleep


async def test_transient_failures_then_success() -> None:
    waits, sleep = _recorder()
    call = Calls(_status_error(500), _timeout(), _connection())
    result = await call_with_retry(
        call, RetryPolicy(max_attempts=4), what=WHAT, sleep=sleep, rand=lambda: 0.0
    )
    assert result == "ok"
    assert call.count == 4
    assert waits == [0.25, 0.5, 1.0]


async def test_rate_limit_waits_what_the_server_asks() -> None:
    waits, sleep = _recorder()
    call = Calls(_status_error(429, {"retry-after": "3"}), _status_error(429,
                 {"retry-after-ms": "120"}))
    policy = RetryPolicy(max_attempts=3, retry_after_jitter=0.0)
    assert await call_with_retry(call, policy, what=WHAT, sleep=sleep) == "ok"
    assert waits == [3.0, 0.12]


async def test_a_persistent_failure_is_unavailable_after_the_bounded_tries() -> None:
    waits, sleep = _recorder()
    call = Calls(*[_status_error(503) for _ in range(10)])
    with pytest.raises(ProviderUnavailable, match="3 time") as caught:
        await call_with_retry(call, RetryPolicy(max_attempts=3), what=WHAT, sleep=sleep)
    assert call.count == 3
    assert len(waits) == 2  # no pointless wait after the last try
    assert isinstance(caught.value.__cause__, openai.InternalServerError)


async def test_a_bad_key_is_not_retried() -> None:
    waits, sleep = _recorder()
    call = Calls(_status_error(401))
    with pytest.raises(ConfigurationError, match="API key") as caught:
        await call_with_retry(call, RetryPolicy(max_attempts=5), what=WHAT, sleep=sleep)
    assert call.count == 1 and waits == []
    assert isinstance(caught.value.__cause__, openai.AuthenticationError)


async def test_a_bad_request_is_a_provider_error_not_unavailable() -> None:
    _, sleep = _recorder()
    call = Calls(_status_error(400))
    with pytest.raises(ProviderError) as caught:
        await call_with_retry(call, RetryPolicy(max_attempts=5), what=WHAT, sleep=sleep)
    assert not isinstance(caught.value, ProviderUnavailable)
    assert call.count == 1


async def test_other_exceptions_pass_through_untouched() -> None:
    async def boom() -> str:
        raise KeyError("a bug, not a provider failure")

    with pytest.raises(KeyError):
        await call_with_retry(boom, RetryPolicy(), what=WHAT)


async def test_every_failed_attempt_is_reported_by_kind() -> None:
    _, sleep = _recorder()
    kinds: list[str] = []
    call = Calls(_status_error(429), _status_error(502), _timeout(), _connection())
    policy = RetryPolicy(max_attempts=5, retry_after_jitter=0.0, on_failure=kinds.append)
    assert await call_with_retry(call, policy, what=WHAT, sleep=sleep, rand=lambda: 0.0) == "ok"
    assert kinds == ["rate_limit", "server_error", "timeout", "connection"]
    with pytest.raises(ConfigurationError):
        await call_with_retry(Calls(_status_error(401)), policy, what=WHAT, sleep=sleep)
    assert kinds[-1] == "config"
