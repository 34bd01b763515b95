"""The fleet's model budget against a real Redis server, and a fleet of worker processes.

The tests shorten the window to seconds so they stay fast; the limits and their
proofs do not depend on its length. The fleet test runs four `memfleet worker`
processes against the LLM stub for more than one window
(MEMFLEET_LLM_BUDGET_WINDOW_S), and reads back what the stub received.
"""

from __future__ import annotations

import asyncio
import bisect
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import WorkerProcesses, bot_msg, job_deps, run_job, user_msg, worker_env
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import ModelBudgetBusy
from worker.protection.breaker import BreakerKeys
from worker.protection.budget import BudgetKeys, BudgetLimits, RedisBudget
from worker.providers.factory import build_providers
from worker.providers.wire import ExtractionRequest, WireMessage

ENDPOINT = "http://127.0.0.1:1/v1"


@pytest.fixture
async def clients(redis_url: str) -> AsyncIterator[list[Redis]]:
    """Separate connections, as separate replicas would have."""
    made = [Redis.from_url(redis_url) for _ in range(4)]
    yield made
    for client in made:
        await client.aclose()


def _budgets(clients: list[Redis], limits: BudgetLimits, **hooks: Any) -> list[RedisBudget]:
    keys = BudgetKeys.of("memfleet:queue", ENDPOINT)
    return [RedisBudget(client, keys, limits, **hooks) for client in clients]


async def until(predicate: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def until_redis(check: Callable[[], Awaitable[bool]], timeout_s: float = 30) -> None:
    """Wait for a state in Redis itself (never a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def most_in_any_window(times: list[float], window_s: float) -> int:
    """The largest number of ``times`` within any window of ``window_s`` (half-open)."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + window_s) - i for i, t in enumerate(ordered)),
               default=0)


def test_the_window_count_helper() -> None:
    assert most_in_any_window([], 1.0) == 0
    assert most_in_any_window([0.0, 0.5, 0.99, 1.0, 1.5], 1.0) == 3
    assert most_in_any_window([0.0, 1.0, 2.0], 1.0) == 1


async def test_requests_per_window_hold_under_concurrent_acquirers(clients: list[Redis]) -> None:
    limits = BudgetLimits(rpm=5, window_s=1.0, poll_s=0.05)
    budgets = _budgets(clients, limits)
    granted: list[float] = []
    deadline = time.monotonic() + 3.5

    async def caller(budget: RedisBudget) -> None:
        while time.monotonic() < deadline:
            await budget.acquire(10)
            granted.append(time.monotonic())

    callers = [asyncio.create_task(caller(budgets[i % len(budgets)])) for i in range(20)]
    await asyncio.sleep(3.5)
    for task in callers:
        task.cancel()
    await asyncio.gather(*callers, return_exceptions=True)
    # Client time lags the grant by a round trip: a slightly shorter window is safe to check.
    assert most_in_any_window(granted, 0.95) <= 5
    # And the budget is used, not merely enforced: a burst, then about five a second.
    assert len(granted) >= 15


async def test_concurrency_never_exceeds_the_limit(clients: list[Redis]) -> None:
    budgets = _budgets(clients, BudgetLimits(concurrency=3, poll_s=0.01))
    in_flight, most, done = 0, 0, 0

    async def caller(budget: RedisBudget) -> None:
        nonlocal in_flight, most, done
        for _ in range(5):
            lease = await budget.acquire(1)
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            await budget.release(lease, None)
            done += 1

    await asyncio.gather(*(caller(budgets[i % len(budgets)]) for i in range(16)))
    assert most == 3
    assert done == 80


async def test_an_expired_lease_is_reclaimed(clients: list[Redis]) -> None:
    first, second = _budgets(clients[:2], BudgetLimits(concurrency=1, lease_s=0.5, poll_s=0.05))
    await first.acquire(1)  # its worker "crashes": never released
    started = time.monotonic()
    lease = await second.acquire(1)
    waited = time.monotonic() - started
    assert 0.3 < waited < 3
    await second.release(lease, None)


async def test_tokens_per_window_with_the_real_usage_counted(clients: list[Redis]) -> None:
    reasons: list[str | None] = []
    budget, other = _budgets(clients[:2], BudgetLimits(tpm=100, window_s=1.0, poll_s=0.02),
                             on_wait=lambda waited, reason: reasons.append(reason))
    lease = await budget.acquire(60)
    await budget.release(lease, 10)  # the server counted fewer than estimated
    await other.acquire(60)  # 10 + 60 fit
    started = time.monotonic()
    await other.acquire(60)  # 70 + 60 do not: waits for the first ones to leave the window
    assert time.monotonic() - started > 0.7
    assert reasons == [None, None, "tpm"], "granted at once twice (10 + 60 fit), then waited"
    # A call larger than the whole budget waits for an empty window, not forever.
    await budget.acquire(500)


async def test_first_come_first_served(clients: list[Redis], redis: Redis) -> None:
    budgets = _budgets(clients, BudgetLimits(rpm=1, window_s=0.6, poll_s=0.02))
    await budgets[0].acquire(1)
    order: list[int] = []

    async def caller(n: int) -> None:
        await budgets[n].acquire(1)
        order.append(n)

    tasks = []
    for n in (1, 2, 3):
        tasks.append(asyncio.create_task(caller(n)))
        # Each joins the line after the one before: wait until it stands in it (or,
        # on a slow machine, was already served from it).
        await until_redis(lambda n=n: _joined(redis, budgets[0].keys.line, order, n))
    await asyncio.gather(*tasks)
    assert order == [1, 2, 3]


async def _joined(redis: Redis, line: str, served: list[int], callers: int) -> bool:
    return int(await redis.zcard(line)) + len(served) >= callers


async def test_a_caller_gives_up_after_the_maximum_wait_and_leaves_the_line(
    clients: list[Redis], redis: Redis,
) -> None:
    first, second = _budgets(clients[:2], BudgetLimits(rpm=1, window_s=30, wait_max_s=1))
    await first.acquire(1)
    with pytest.raises(ModelBudgetBusy, match="rpm"):
        await second.acquire(1)
    assert await redis.zcard(second.keys.line) == 0


async def test_a_pause_holds_every_replica_and_is_never_shortened(clients: list[Redis]) -> None:
    pauses: list[int] = []
    first, second = _budgets(clients[:2], BudgetLimits(rpm=100), on_pause=lambda: pauses.append(1))
    reasons: list[str | None] = []
    watched = RedisBudget(clients[2], second.keys, second.limits,
                          on_wait=lambda s, reason: reasons.append(reason))
    assert await first.pause(1.0)
    assert await second.pause(0.1)  # a shorter hint leaves the longer pause alone
    started = time.monotonic()
    await watched.acquire(1)
    assert time.monotonic() - started > 0.8
    assert reasons == ["paused"]
    assert len(pauses) == 2


# ---------------------------------------------------------------- the providers and the stub


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(dim=64) as server:
        yield server


EXTRACTION = ExtractionRequest(
    observed_at="2026-11-22 (Sunday)", summary=None, context=(),
    messages=(WireMessage(role="user", content="I love green tea."),),
)


async def test_a_429_from_the_stub_pauses_an_independent_provider(
    stub: StubServer, redis_url: str,
) -> None:
    stub.reset()
    settings = Settings(database_url="postgresql://unused", redis_url=redis_url,
                        llm_provider="openai", llm_base_url=stub.v1, embed_dim=64,
                        llm_budget_rpm=1000)
    stub.add_fault("429", path=CHAT_PATH, retry_after=2)
    first_redis, second_redis = Redis.from_url(redis_url), Redis.from_url(redis_url)
    first = build_providers(settings, redis=first_redis)
    second = build_providers(settings, redis=second_redis)
    try:
        told = asyncio.create_task(first.extractor.extract(EXTRACTION))
        await until(lambda: bool(stub.recorded()), 10)
        paused = BudgetKeys.of(settings.queue_name, stub.v1).paused
        await until_redis(lambda: _exists(first_redis, paused))  # the 429 is in, its pause set
        await second.extractor.extract(EXTRACTION)
        await told
    finally:
        await first.aclose()
        await second.aclose()
        await first_redis.aclose()
        await second_redis.aclose()
    times = [r["at"] for r in stub.recorded()]
    assert len(times) == 3  # the 429, then each provider once
    assert min(times[1:]) - times[0] > 1.8  # neither called before the pause was over


async def _exists(redis: Redis, key: str) -> bool:
    return bool(await redis.exists(key))


# ---------------------------------------------------------------- the fleet


RPM = 30  # requests per window
WINDOW_S = 10.0  # MEMFLEET_LLM_BUDGET_WINDOW_S: the real minute, shortened to stay fast
WORKERS = 4
SESSIONS = 40
RUN_S = 1.25 * WINDOW_S  # into the second window


def conversation(n: int) -> list[dict[str, str]]:
    return [user_msg(f"I live in city{n}. I love tea{n}."), bot_msg("ok"),
            user_msg(f"I use tool{n}."), bot_msg("ok")]


@pytest.mark.slow
async def test_the_budget_holds_fleet_wide(settings: Settings, tmp_path: Path) -> None:
    """Four worker processes, a budget of RPM requests a window on the stub's endpoint
    (chat and embeddings alike), and far more work than that: the stub never sees
    more than RPM requests in any window, the fleet works at the limit, no job fails."""
    with StubServer(dim=settings.embed_dim) as stub:
        env = worker_env(settings, llm_provider="openai", llm_base_url=stub.v1,
                         embed_provider="openai", llm_budget_rpm=str(RPM),
                         llm_budget_window_s=str(WINDOW_S), max_jobs="5")
        fleet = WorkerProcesses(env, tmp_path, count=WORKERS)
        redis = Redis.from_url(settings.redis_url or "")
        db = await asyncpg.connect(settings.database_url)
        try:
            for n in range(SESSIONS):
                await schedule_memory_persistence(redis, f"s{n}", f"user{n}", conversation(n),
                                                  timeout_s=30)
            await until(lambda: bool(stub.recorded()), 30)
            first = time.monotonic()
            await asyncio.sleep(max(0.0, first + RUN_S - time.monotonic()))
            assert all(proc.poll() is None for proc in fleet.procs), "a worker died"
            times = sorted(r["at"] for r in stub.recorded())
            outcomes = dict(await db.fetch(
                "SELECT outcome, count(*) FROM memory_run GROUP BY outcome"))
        finally:
            for proc in fleet.procs:  # ours, and jobs still wait for budget: no grace
                proc.send_signal(signal.SIGKILL)
            for proc in fleet.procs:
                proc.wait()
            await redis.aclose()
            await db.close()
    busiest = most_in_any_window(times, WINDOW_S)
    in_first_window = sum(1 for t in times if t < times[0] + WINDOW_S)
    figures = (f"{len(times)} requests in {times[-1] - times[0]:.1f} s, at most {busiest} in"
               f" any {WINDOW_S:g} s (budget {RPM}), {in_first_window} in the first window;"
               f" runs {outcomes}")
    assert busiest <= RPM, figures
    assert in_first_window >= 0.8 * RPM, figures
    assert len(times) > RPM, figures  # the work went on into the second window
    assert outcomes.get("committed", 0) > 0, figures
    # Waiting for budget is not failing: no run failed, none was sent back to retry.
    assert set(outcomes) <= {"committed", "skipped"}, figures


async def test_a_job_out_of_budget_hands_its_session_on_without_failing(
    settings: Settings, redis: Redis, db: asyncpg.Connection,
) -> None:
    """Waiting past MEMFLEET_LLM_BUDGET_WAIT_MAX_S is not a model failure: the job
    defers its session, spends no try, and leaves the circuit breaker closed."""
    with StubServer(dim=TEST_EMBED_DIM) as stub:
        tight = settings.model_copy(update={
            "llm_provider": "openai", "llm_base_url": stub.v1, "embed_provider": "openai",
            "embed_base_url": stub.v1, "extract_model": "stub", "consolidate_model": "stub",
            "llm_budget_rpm": 1, "llm_budget_wait_max_s": 0.5,
        })
        await schedule_memory_persistence(redis, "s1", "u1", [user_msg("I use Zig.")],
                                          queue_name=tight.queue_name)
        async with job_deps(tight, redis, build_providers(tight, redis=redis)) as deps:
            # The extraction takes the minute's one request; the embeddings call waits.
            result = await run_job(deps, "s1", "j1", user_id="u1")
        assert result["outcome"] == "deferred" and "ModelBudgetBusy" in result["error"]
        assert len(stub.recorded()) == 1, "nothing sent beyond the budget"
    keys = BreakerKeys.of(tight.queue_name)
    assert await redis.exists(keys.open, keys.failures) == 0, "the breaker stays closed"
    assert await redis.zcard(tight.queue_name) == 1, "a later job takes the session over"
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 0
