"""Bounded retries for provider HTTP calls, and the translation of openai's errors.

Transient failures (429, 408, 409, 5xx, timeouts, lost connections) are tried
again with exponential backoff and jitter, honouring a server's Retry-After up
to a cap. A failure that outlasts the tries becomes ProviderUnavailable, so the
job is retried later by ARQ with the session cursor untouched. Errors that
another try cannot fix (bad key, unknown model, refused request) are raised at
once. Messages carry status codes and error codes, never response bodies,
which can echo the conversation.

The decisions are pure functions; ``call_with_retry`` takes its sleep and its
randomness as arguments so tests neither wait nor flake.

With a fleet budget (worker.protection.budget) every attempt first takes a slot of the
endpoint's budget and gives it back when it is over, with the tokens the
server counted; a 429 with Retry-After pauses the whole fleet instead of this
caller alone. Without one (``RetryPolicy.budget`` None) nothing of it runs.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

import openai

from worker.errors import ConfigurationError, ProviderError, ProviderUnavailable
from worker.protection.budget import ModelBudget

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
# The tokens a call's answer says it used, if it says.
UsedTokens = Callable[[T], int | None]

_RETRYABLE_STATUS = frozenset({408, 409, 429})
_CONFIG_STATUS = {
    401: "rejected the API key (HTTP 401)",
    403: "refused access with this key (HTTP 403)",
    404: "does not know this path or model (HTTP 404): check the base URL and model name",
}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 4
    # Told the kind of every failed attempt (rate_limit, server_error, timeout,
    # connection, client_error, config, invalid_answer; cut_off for an answer cut at
    # the token limit whose complete items were kept): the worker counts them.
    on_failure: Callable[[str], None] | None = None
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    retry_after_cap_s: float = 30.0
    # Extra wait on top of a Retry-After, as a fraction of it, so that clients
    # told the same instant do not all return at once.
    retry_after_jitter: float = 0.1
    # The endpoint's fleet budget; None: calls go out unmetered, with no Redis round trip.
    budget: ModelBudget | None = None


@dataclass(frozen=True, slots=True)
class TryAgain:
    """Try again; ``retry_after_s`` is the server's Retry-After when it gave one."""

    reason: str
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Do not try again; raise ``error`` (from the original exception)."""

    error: Exception


def retry_after_seconds(headers: Mapping[str, str], now: datetime) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, or ``Retry-After`` seconds or date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis)
        except ValueError:
            value = -1.0
        if value >= 0 and value == value:  # not NaN
            return value / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP-date is GMT by definition
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - now).total_seconds())
    if seconds != seconds or seconds < 0:  # NaN or negative: ignore
        return None
    return seconds


def backoff_delay(attempt: int, policy: RetryPolicy, rand: float) -> float:
    """Wait before try ``attempt + 1``: exponential, with the upper half jittered.

    ``rand`` is in [0, 1). Half the step is kept so a retry never comes back
    at once; the other half spreads clients that failed together.
    """
    step = min(policy.max_delay_s, policy.base_delay_s * (2.0 ** max(0, attempt - 1)))
    return step / 2.0 + step / 2.0 * rand


def wait_for(decision: TryAgain, attempt: int, policy: RetryPolicy, rand: float) -> float:
    """The wait before the next try, given the server's hint if any."""
    if decision.retry_after_s is None:
        return backoff_delay(attempt, policy, rand)
    hinted = min(decision.retry_after_s, policy.retry_after_cap_s)
    return hinted + hinted * policy.retry_after_jitter * rand


def _error_code(exc: openai.APIStatusError) -> str:
    # ``code``/``param`` are identifiers like "model_not_found" or "response_format":
    # safe to report, and they say what to fix. The message may quote the input.
    details = [f"{name}={value}" for name, value in (("code", exc.code), ("param", exc.param))
               if value]
    return f" ({', '.join(details)})" if details else ""


def failure_kind(exc: openai.OpenAIError) -> str:
    """A small, fixed vocabulary for metrics labels."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429:
            return "rate_limit"
        if exc.status_code >= 500:
            return "server_error"
        if exc.status_code in _CONFIG_STATUS:
            return "config"
        return "client_error"
    return "other"


def classify(exc: openai.OpenAIError, what: str, now: datetime) -> TryAgain | GiveUp:
    """What to do about one failed call to ``what`` (say "the LLM endpoint")."""
    if isinstance(exc, openai.APITimeoutError):
        return TryAgain("timeout")
    if isinstance(exc, openai.APIConnectionError):
        return TryAgain("connection error")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in _RETRYABLE_STATUS or status >= 500:
            return TryAgain(f"HTTP {status}", retry_after_seconds(exc.response.headers, now))
        if status in _CONFIG_STATUS:
            return GiveUp(ConfigurationError(f"{what} {_CONFIG_STATUS[status]}"))
        hint = ""
        if status == 400 and exc.param == "response_format":
            hint = ": without json_schema support set MEMFLEET_LLM_STRUCTURED_OUTPUT=json_object"
        return GiveUp(ProviderError(
            f"{what} refused the request (HTTP {status}){_error_code(exc)}{hint}"
        ))
    # Anything else (an unreadable response, a client-side error) will not heal by itself.
    return GiveUp(ProviderError(f"{what} failed: {type(exc).__name__}"))


async def _metered(
    call: Callable[[], Awaitable[T]], budget: ModelBudget, tokens: int,
    used: UsedTokens[T] | None,
) -> T:
    """One attempt inside a slot of the budget, given back however the attempt ends."""
    lease = await budget.acquire(tokens)
    spent: int | None = None
    try:
        result = await call()
        spent = used(result) if used is not None else None
        return result
    finally:
        await budget.release(lease, spent)


def _is_rate_limit(exc: openai.OpenAIError) -> bool:
    return isinstance(exc, openai.APIStatusError) and exc.status_code == 429


async def call_with_retry(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str,
    sleep: Sleep = asyncio.sleep,
    rand: Callable[[], float] = random.random,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    tokens: int = 0,
    used: UsedTokens[T] | None = None,
) -> T:
    """Run ``call`` up to ``policy.max_attempts`` times; translate what openai raises.

    ``tokens`` is the call's estimate for the budget, ``used`` reads the real
    count from an answer; both matter only with ``policy.budget``.
    """
    budget = policy.budget
    last = "no attempt"
    for attempt in range(1, policy.max_attempts + 1):
        try:
            if budget is None:
                return await call()
            return await _metered(call, budget, tokens, used)
        except openai.OpenAIError as exc:
            if policy.on_failure is not None:
                policy.on_failure(failure_kind(exc))
            decision = classify(exc, what, now())
            if isinstance(decision, GiveUp):
                raise decision.error from exc
            last = decision.reason
            # The whole fleet heeds a 429's Retry-After, even after this call's last try.
            paused = (budget is not None and decision.retry_after_s is not None
                      and _is_rate_limit(exc)
                      and await budget.pause(min(decision.retry_after_s,
                                                 policy.retry_after_cap_s)))
            if attempt == policy.max_attempts:
                raise ProviderUnavailable(
                    f"{what} failed {attempt} time(s); last: {last}"
                ) from exc
            if paused:
                continue  # the next acquire waits the pause out, with the rest of the fleet
            await sleep(wait_for(decision, attempt, policy, rand()))
    raise ProviderUnavailable(f"{what} failed; last: {last}")  # pragma: no cover - max_attempts>=1
