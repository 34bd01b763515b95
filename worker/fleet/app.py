"""ARQ worker settings: resources built once in on_startup, closed in on_shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import structlog
from arq.connections import RedisSettings
from arq.worker import func
from redis.asyncio import Redis
from redis.asyncio.retry import Retry as RedisRetry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.config import Settings, secret
from worker.errors import ConfigurationError
from worker.fleet import orphans, periodic, probe, server_watch
from worker.fleet.gc_tuning import quiet_garbage_collector
from worker.fleet.job import Deps, persist_session_memory
from worker.fleet.metrics import MetricsServer
from worker.fleet.portrait_job import PORTRAIT_JOB_TRIES, refresh_user_portrait
from worker.metrics import Metrics
from worker.ops import expiry
from worker.ops.note_promotion import PromotionPolicy, promotion_pass
from worker.protocol import lock, queue, serialization
from worker.protocol.arq_worker import Worker
from worker.protocol.payload import Limits
from worker.providers.factory import build_note_promoter, build_providers, embedding_model
from worker.store.base import MaintenanceStore
from worker.store.fence_key import fence_keys
from worker.store.maintenance import PostgresMaintenanceStore
from worker.store.migrate import check_schema
from worker.store.note_promotion import PostgresNotePromotion
from worker.store.pool import GENERIC_PLANS, close_pool, create_pool
from worker.store.postgres import PostgresStore
from worker.telemetry import Telemetry, hide_job_arguments, setup_telemetry

log = structlog.get_logger("memfleet.app")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The worker's event loop: uvloop's where it is installed, asyncio's otherwise.

    Same asyncio API, less work each time a job waits on Redis or PostgreSQL
    and wakes up (measured in docs/bench.md).
    """
    try:
        import uvloop
    except ImportError:  # no wheel for this platform: asyncio's own loop works the same
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


REDIS_BACKOFF_CAP_S = 3.0
BACKGROUND_LOOPS = ("heartbeat", "recovery", "expiry", "notes_promotion", "server_watch")


def redis_settings(url: str, retries: int) -> RedisSettings:
    """ARQ's connection settings, with every Redis command retried with backoff while
    Redis is unreachable (a restart, a failover). After ``retries`` tries the error
    surfaces to its caller: a job is tried again later; the worker itself waits for
    Redis however long it takes (worker.fleet.server_watch)."""
    redis = RedisSettings.from_dsn(url)
    redis.retry = RedisRetry(ExponentialBackoff(cap=REDIS_BACKOFF_CAP_S, base=0.1), retries)
    redis.retry_on_error = [RedisConnectionError, RedisTimeoutError, OSError]
    return redis


def worker_options(
    settings: Settings, *, burst: bool = False, telemetry: Telemetry | None = None,
    tune_gc: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for ``arq.worker.Worker``, from settings read by the caller.

    ``tune_gc``: a worker process of its own (``memfleet worker``) calls
    ``quiet_garbage_collector`` once started; tests and the demo, which share
    their process with other code, leave the collector alone.
    """
    if settings.redis_url is None or settings.database_url is None:
        raise ConfigurationError("worker_options needs resolved database and Redis URLs")
    # Every commit checks a fence.
    fences = fence_keys(secret(settings.erase_fence_key), settings.home_dir)
    telemetry = telemetry or setup_telemetry(settings)
    # Whether Redis and PostgreSQL answer: the worker takes jobs only while both do.
    watch = server_watch.ServerWatch()

    async def on_startup(ctx: dict[str, Any]) -> None:
        pool = await create_pool(settings.database_url or "", min_size=settings.db_pool_min,
                                 max_size=settings.db_pool_max, server_settings=GENERIC_PLANS,
                                 reset=False)
        async with pool.acquire() as conn:
            await check_schema(conn, settings.embed_dim,
                               embed_model=embedding_model(settings))
        store = PostgresStore(pool, fences)
        await store.check_fence_key()
        ctx["pool"] = pool
        # The model budget is the fleet's, on the first shard whichever shard this
        # worker serves (docs/protocol.md, "Shards").
        budget_redis = ctx["redis"]
        first_shard = (settings.redis_shard_entries or ((None, settings.redis_url),))[0][1]
        if settings.redis_shards and first_shard != settings.redis_url:
            budget_redis = ctx["budget_redis"] = Redis.from_url(
                first_shard or "", retry=RedisRetry(
                    ExponentialBackoff(cap=REDIS_BACKOFF_CAP_S, base=0.1),
                    settings.redis_retries),
                retry_on_error=[RedisConnectionError, RedisTimeoutError, OSError])
        ctx["deps"] = Deps(
            settings=settings,
            redis=ctx["redis"],
            store=store,
            providers=build_providers(settings, on_failure=lambda kind: (
                telemetry.metrics.llm_errors.add(1, {"kind": kind})), redis=budget_redis,
                metrics=telemetry.metrics),
            limits=Limits.from_settings(settings),
            telemetry=telemetry,
            portraits=store if settings.portrait_enabled else None,
        )
        redis = ctx["redis"]
        running = telemetry.metrics.running
        metrics = telemetry.metrics
        ctx["heartbeat"] = asyncio.create_task(probe.keep_beating(
            redis, settings.queue_name, lambda: sorted(running)))

        async def recover() -> None:
            # While a server is away this worker takes no job: the sessions it would
            # queue again would only be queued again at every pass.
            if not watch.down():
                await recovery_pass(redis, settings.queue_name, metrics, lambda: running)

        ctx["recovery"] = asyncio.create_task(periodic.every(
            settings.recovery_interval_s, recover, name="recovery pass"))
        if settings.expiry_interval_s > 0:
            # Nothing waits for it (reads skip an expired fact already): spread out.
            maintenance = PostgresMaintenanceStore(pool)
            ctx["expiry"] = asyncio.create_task(periodic.every(
                settings.expiry_interval_s, lambda: expiry_pass(maintenance, metrics),
                name="expiry pass", first_delay_s=periodic.spread(settings.expiry_interval_s)))
        if settings.notes_enabled and settings.notes_promote_interval_s > 0:
            # Recurring notes become facts (docs/notes.md): one pass at a time in the
            # fleet, spread out like the expiry pass.
            promoter = ctx["note_promoter"] = build_note_promoter(
                settings, on_failure=lambda kind: telemetry.metrics.llm_errors.add(
                    1, {"kind": kind}), redis=budget_redis, metrics=metrics)
            notes_store, policy = PostgresNotePromotion(pool), PromotionPolicy.from_settings(
                settings)
            embedder = ctx["deps"].providers.embedder
            ctx["notes_promotion"] = asyncio.create_task(periodic.every(
                settings.notes_promote_interval_s,
                lambda: promotion_pass(notes_store, promoter, embedder, policy,
                                       metrics=metrics),
                name="notes promotion pass",
                first_delay_s=periodic.spread(settings.notes_promote_interval_s)))
        watch_redis = ctx["watch_redis"] = Redis.from_url(
            settings.redis_url or "", socket_connect_timeout=server_watch.CHECK_TIMEOUT_S,
            socket_timeout=server_watch.CHECK_TIMEOUT_S)
        watch.add("Redis", settings.redis_url, watch_redis.ping)

        async def postgres_answers() -> None:
            if pool.get_idle_size() == 0 and pool.get_size() >= pool.get_max_size():
                raise server_watch.NoNews  # every connection busy with jobs: not away
            await store.ping()

        watch.add("PostgreSQL", settings.database_url, postgres_answers)
        ctx["server_watch"] = asyncio.create_task(watch.run())
        if settings.metrics_port is not None:
            server = MetricsServer(telemetry.render_metrics, watch.down)
            port = await server.start(settings.metrics_host, settings.metrics_port)
            ctx["metrics_server"] = server
            log.info("serving /metrics, /healthz and /readyz", port=port)
        if tune_gc:
            quiet_garbage_collector()

    async def on_shutdown(ctx: dict[str, Any]) -> None:
        for name in BACKGROUND_LOOPS:
            await periodic.stop(ctx.get(name))
        server = ctx.get("metrics_server")
        if server is not None:
            await server.stop()
        deps: Deps | None = ctx.get("deps")
        if deps is not None:
            await deps.providers.aclose()
        promoter = ctx.get("note_promoter")
        if promoter is not None:
            await promoter.aclose()
        pool = ctx.get("pool")
        if pool is not None:
            await close_pool(pool)
        for name in ("budget_redis", "watch_redis"):
            client = ctx.get(name)
            if client is not None:
                await client.aclose()

    return {
        "functions": [
            func(persist_session_memory, name=queue.JOB_FUNCTION,
                 timeout=settings.job_timeout_s, max_tries=settings.max_tries),
            # The user's portrait (docs/portrait.md): registered even when off, so a
            # refresh queued before the switch ends as "disabled" rather than unknown.
            func(refresh_user_portrait, name=queue.PORTRAIT_JOB_FUNCTION,
                 timeout=settings.job_timeout_s, max_tries=PORTRAIT_JOB_TRIES),
        ],
        "queue_name": settings.queue_name,
        "redis_settings": redis_settings(settings.redis_url, settings.redis_retries),
        "on_startup": on_startup,
        "on_shutdown": on_shutdown,
        "job_serializer": serialization.serialize,
        "job_deserializer": serialization.deserialize,
        "max_jobs": settings.max_jobs,
        "job_timeout": settings.job_timeout_s,
        "max_tries": settings.max_tries,
        # Job ids are unique per hand-over, so a kept result never blocks a later one.
        "keep_result": settings.keep_result_s,
        # On SIGTERM stop taking jobs and let running ones finish (k8s grace period).
        "job_completion_wait": int(settings.job_timeout_s),
        "burst": burst,
        "poll_delay": 0 if burst else settings.poll_delay_s,
        "handle_signals": not burst,
        "servers": watch,
    }


async def recovery_pass(
    redis: Any, queue_name: str, metrics: Metrics, own_jobs: Callable[[], Iterable[str]] = tuple,
) -> None:
    """Queue again the sessions dead workers left behind (worker.protocol.lock), then
    retire their jobs (worker.fleet.orphans); ``own_jobs``: the jobs this worker runs."""
    sessions = await lock.recover_abandoned(redis, queue_name)
    if sessions:
        log.warning("abandoned sessions queued again", count=len(sessions))
        metrics.recovered.add(len(sessions))
    # After the sessions: a dead job is retired once its session is queued again.
    retired = await orphans.retire_orphans(redis, queue_name, own_jobs())
    if retired:
        log.warning("dead workers' jobs retired", count=len(retired))


async def expiry_pass(store: MaintenanceStore, metrics: Metrics) -> None:
    """Make history of the facts whose expiry has come (worker.ops.expiry)."""
    expired = await expiry.expire_due(store)
    if expired:
        log.info("facts expired", count=expired)
        metrics.expired.add(expired)


async def drain_queue(
    settings: Settings, *, telemetry: Telemetry | None = None, **overrides: Any
) -> Worker:
    """Run a burst worker until the queue (deferred jobs included) is empty; return it."""
    worker = build_worker(settings, burst=True, telemetry=telemetry, poll_delay=0, **overrides)
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker


def build_worker(
    settings: Settings,
    *,
    burst: bool = False,
    telemetry: Telemetry | None = None,
    tune_gc: bool = False,
    **overrides: Any,
) -> Worker:
    options = worker_options(settings, burst=burst, telemetry=telemetry, tune_gc=tune_gc)
    hide_job_arguments()
    return Worker(**{**options, **overrides})
