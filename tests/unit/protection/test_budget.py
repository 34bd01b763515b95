"""The fleet's model budget without Redis: its pure parts, how the retry loop uses a
budget, and what the factory builds from the settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.config import Settings
from worker.errors import ModelBudgetBusy, ProviderError, ProviderUnavailable
from worker.protection.budget import (
    BudgetKeys,
    BudgetLimits,
    Granted,
    Lease,
    RedisBudget,
    Wait,
    decode,
    endpoint_id,
    estimate_tokens,
    sleep_for,
)
from worker.protection.retry import RetryPolicy, call_with_retry
from worker.protocol.keys import BUDGET_PREFIX
from worker.providers.factory import budget_limits, build_providers
from worker.providers.openai_chat import ANSWER_ALLOWANCE_TOKENS, OpenAIExtractor, request_tokens
from worker.providers.openai_embed import OpenAIEmbedder

URL = "http://127.0.0.1:9/v1/chat/completions"
WHAT = "the LLM endpoint"


def _status_error(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    request = httpx2.Request("POST", URL)
    response = httpx2.Response(status, headers=headers or {}, request=request)
    kind = {429: openai.RateLimitError, 400: openai.BadRequestError}.get(
        status, openai.InternalServerError)
    return kind(f"HTTP {status}", response=response, body=None)


class FakeBudget:
    """Records what the retry loop asks of a budget."""

    def __init__(self, *, pause_ok: bool = True) -> None:
        self.events: list[tuple[str, Any]] = []
        self.pause_ok = pause_ok
        self.held = 0

    async def acquire(self, tokens: int) -> Lease:
        self.held += 1
        self.events.append(("acquire", tokens))
        return Lease(f"t{len(self.events)}", tokens)

    async def release(self, lease: Lease, used_tokens: int | None) -> None:
        self.held -= 1
        self.events.append(("release", used_tokens))

    async def pause(self, seconds: float) -> bool:
        self.events.append(("pause", seconds))
        return self.pause_ok


class Script:
    """A call that raises the given errors in turn, then answers "ok"."""

    def __init__(self, budget: FakeBudget | None, *errors: Exception) -> None:
        self.errors, self.budget, self.calls = list(errors), budget, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.budget is not None:
            assert self.budget.held == 1, "every attempt runs inside a slot"
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def _recorder() -> tuple[list[float], Callable[[float], Awaitable[None]]]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    return slept, sleep


# ---------------------------------------------------------------- pure parts


@given(st.integers(min_value=-10, max_value=10_000), st.integers(min_value=0, max_value=5000))
def test_the_token_estimate_rounds_up_and_adds_the_allowance(chars: int, allowance: int) -> None:
    estimate = estimate_tokens(chars, allowance)
    assert estimate >= allowance
    assert (estimate - allowance) * 4 >= max(0, chars) > (estimate - allowance - 1) * 4


def test_a_chat_request_is_counted_with_room_for_the_answer() -> None:
    messages = [{"role": "system", "content": "x" * 40}, {"role": "user", "content": "y" * 41}]
    assert request_tokens(messages) == 21 + ANSWER_ALLOWANCE_TOKENS


def test_the_script_answer_is_decoded() -> None:
    assert decode([1, 0, 0]) == Granted()
    assert decode([0, 1500, 1]) == Wait(1.5, "rpm")
    assert decode([0, 10, 2]) == Wait(0.01, "tpm")
    assert decode([0, 250, 3]) == Wait(0.25, "concurrency")
    assert decode([0, 30_000, 4]) == Wait(30.0, "paused")
    assert decode([b"0", b"5", b"9"]) == Wait(0.005, "other")


@given(st.floats(min_value=0, max_value=120), st.floats(min_value=0, max_value=0.999))
def test_a_waiter_sleeps_at_least_the_wait_and_at_most_a_poll_more(wait: float,
                                                                   rand: float) -> None:
    slept = sleep_for(Wait(wait, "rpm"), rand, 0.25)
    assert wait <= slept < wait + 0.25


def test_keys_name_the_endpoint_by_a_hash_in_one_cluster_slot() -> None:
    keys = BudgetKeys.of("memfleet:queue", "https://api.example.com/v1")
    tag = "{" + endpoint_id("memfleet:queue", "https://api.example.com/v1") + "}"
    names = [keys.log, keys.leases, keys.line, keys.alive, keys.asks, keys.paused]
    assert all(name.startswith(BUDGET_PREFIX + tag + ":") for name in names)
    assert len(set(names)) == len(names)
    assert keys.paused.endswith(":paused-until")
    assert not any("example" in name for name in names)
    # A trailing slash is the same endpoint; another queue or endpoint is another budget.
    assert BudgetKeys.of("memfleet:queue", "https://api.example.com/v1/") == keys
    assert BudgetKeys.of("other", "https://api.example.com/v1") != keys
    assert BudgetKeys.of("memfleet:queue", "http://127.0.0.1:8000/v1") != keys


def test_limits_from_settings() -> None:
    assert BudgetLimits().unlimited
    limits = budget_limits(Settings(llm_budget_rpm=30, llm_budget_tpm=9000,
                                    llm_budget_concurrency=4, llm_budget_wait_max_s=50,
                                    llm_timeout_s=20, embed_timeout_s=10))
    assert (limits.rpm, limits.tpm, limits.concurrency, limits.wait_max_s) == (30, 9000, 4, 50)
    assert not limits.unlimited
    assert limits.lease_s > 20
    assert limits.window_s > 60  # a minute, and a margin for the way to the server
    shorter = budget_limits(Settings(llm_budget_rpm=30, llm_budget_window_s=5))
    assert 5 < shorter.window_s < 60, "the window is a setting (tests shorten it)"


def test_budget_settings_default_to_none_and_refuse_negatives() -> None:
    settings = Settings()
    assert (settings.llm_budget_rpm, settings.llm_budget_tpm,
            settings.llm_budget_concurrency) == (0, 0, 0)
    with pytest.raises(ValueError, match="llm_budget_rpm"):
        Settings(llm_budget_rpm=-1)


# ---------------------------------------------------------------- the retry loop


async def test_without_a_budget_nothing_is_asked() -> None:
    call = Script(None, _status_error(500))
    _, sleep = _recorder()
    assert await call_with_retry(call, RetryPolicy(), what=WHAT, sleep=sleep, tokens=5) == "ok"
    assert call.calls == 2


async def test_every_attempt_takes_a_slot_and_gives_it_back() -> None:
    budget = FakeBudget()
    call = Script(budget, _status_error(500))
    slept, sleep = _recorder()
    result = await call_with_retry(call, RetryPolicy(budget=budget), what=WHAT, sleep=sleep,
                                   tokens=70, used=lambda answer: len(answer))
    assert result == "ok"
    # The failed attempt keeps its estimate; the answered one reports what it used.
    assert budget.events == [("acquire", 70), ("release", None),
                             ("acquire", 70), ("release", 2)]
    assert len(slept) == 1  # a 500 backs off as usual


async def test_a_429_with_retry_after_pauses_the_fleet_instead_of_sleeping() -> None:
    budget = FakeBudget()
    call = Script(budget, _status_error(429, {"retry-after": "3"}))
    slept, sleep = _recorder()
    policy = RetryPolicy(budget=budget, retry_after_cap_s=30)
    assert await call_with_retry(call, policy, what=WHAT, sleep=sleep) == "ok"
    assert ("pause", 3.0) in budget.events
    assert slept == []  # the next acquire waits the pause out


async def test_a_429_on_the_last_try_still_pauses_the_fleet() -> None:
    budget = FakeBudget()
    call = Script(budget, _status_error(429, {"retry-after": "3"}))
    _, sleep = _recorder()
    with pytest.raises(ProviderUnavailable):
        await call_with_retry(call, RetryPolicy(budget=budget, max_attempts=1), what=WHAT,
                              sleep=sleep)
    assert ("pause", 3.0) in budget.events


async def test_a_pause_is_capped_and_a_failed_pause_falls_back_to_sleeping() -> None:
    budget = FakeBudget(pause_ok=False)
    call = Script(budget, _status_error(429, {"retry-after": "600"}))
    slept, sleep = _recorder()
    policy = RetryPolicy(budget=budget, retry_after_cap_s=20, retry_after_jitter=0)
    assert await call_with_retry(call, policy, what=WHAT, sleep=sleep, rand=lambda: 0) == "ok"
    assert ("pause", 20) in budget.events
    assert slept == [20]


async def test_a_429_without_a_hint_does_not_pause() -> None:
    budget = FakeBudget()
    call = Script(budget, _status_error(429))
    slept, sleep = _recorder()
    assert await call_with_retry(call, RetryPolicy(budget=budget), what=WHAT, sleep=sleep) == "ok"
    assert not any(kind == "pause" for kind, _ in budget.events)
    assert len(slept) == 1


async def test_a_refused_request_still_gives_its_slot_back() -> None:
    budget = FakeBudget()
    call = Script(budget, _status_error(400))
    _, sleep = _recorder()
    with pytest.raises(ProviderError):
        await call_with_retry(call, RetryPolicy(budget=budget), what=WHAT, sleep=sleep)
    assert budget.held == 0


class NoBudget(FakeBudget):
    async def acquire(self, tokens: int) -> Lease:
        raise ModelBudgetBusy("no model budget")


async def test_no_budget_in_time_is_busy_and_nothing_is_sent() -> None:
    budget = NoBudget()
    call = Script(budget)
    with pytest.raises(ModelBudgetBusy):
        await call_with_retry(call, RetryPolicy(budget=budget), what=WHAT)
    assert call.calls == 0


# ---------------------------------------------------------------- RedisBudget's loop


class ScriptedRedis:
    """Answers the acquire script from a list; records the release and pause calls."""

    def __init__(self, *answers: list[int]) -> None:
        self.answers = list(answers)
        self.calls: list[str] = []

    async def evalsha(self, sha: str, numkeys: int, *args: Any) -> Any:
        keys = args[:numkeys]
        if numkeys == 6:
            self.calls.append("acquire")
            return self.answers.pop(0)
        self.calls.append("pause" if numkeys == 1 else "release")
        return 1 if keys else 0


async def test_the_budget_sleeps_as_told_and_reports_the_wait() -> None:
    redis = ScriptedRedis([0, 2000, 1], [0, 500, 3], [1, 0, 0])
    slept, sleep = _recorder()
    seen: list[tuple[float, str | None]] = []
    budget = RedisBudget(redis, BudgetKeys.of("q", "http://x/v1"), BudgetLimits(rpm=5),
                         sleep=sleep, rand=lambda: 0.0, on_wait=lambda s, r: seen.append((s, r)))
    lease = await budget.acquire(12)
    assert lease.tokens == 12
    assert slept == [2.0, 0.5]
    assert seen and seen[0][1] == "rpm"  # the first reason it waited for
    assert redis.calls == ["acquire"] * 3
    await budget.release(lease, 10)
    assert redis.calls == ["acquire"] * 3  # requests alone: nothing to give back


async def test_the_budget_gives_up_when_the_wait_would_pass_the_maximum() -> None:
    redis = ScriptedRedis([0, 200_000, 1])
    slept, sleep = _recorder()
    budget = RedisBudget(redis, BudgetKeys.of("q", "http://x/v1"),
                         BudgetLimits(concurrency=2, wait_max_s=120), sleep=sleep)
    with pytest.raises(ModelBudgetBusy, match="rpm"):
        await budget.acquire(1)
    assert slept == []
    assert redis.calls == ["acquire", "release"]  # it left the line


# ---------------------------------------------------------------- the factory


def _openai_settings(**extra: Any) -> Settings:
    return Settings(llm_provider="openai", llm_base_url="http://127.0.0.1:9/v1",
                    embed_provider="openai", embed_dim=64, **extra)


def _budgets(providers: Any) -> list[Any]:
    return [p._options.retry.budget for p in (providers.extractor, providers.consolidator,
                                              providers.summarizer, providers.embedder)]


async def test_no_limit_or_no_redis_builds_no_budget() -> None:
    for providers in (build_providers(_openai_settings(), redis=object()),
                      build_providers(_openai_settings(llm_budget_rpm=5))):
        assert _budgets(providers) == [None] * 4
        await providers.aclose()


async def test_one_endpoint_one_budget_for_chat_and_embeddings() -> None:
    providers = build_providers(_openai_settings(llm_budget_rpm=5), redis=object())
    assert isinstance(providers.extractor, OpenAIExtractor)
    assert isinstance(providers.embedder, OpenAIEmbedder)
    budgets = _budgets(providers)
    assert isinstance(budgets[0], RedisBudget)
    assert all(b is budgets[0] for b in budgets)
    await providers.aclose()
    apart = build_providers(_openai_settings(llm_budget_rpm=5,
                                             embed_base_url="http://127.0.0.1:10/v1"),
                            redis=object())
    chat, *_, embed = _budgets(apart)
    assert isinstance(embed, RedisBudget) and isinstance(chat, RedisBudget)
    assert embed.keys != chat.keys
    await apart.aclose()
