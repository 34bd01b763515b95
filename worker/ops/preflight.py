"""A process's first contact with its servers, before it starts serving.

Once running, workers and the API ride out outages (retries, backoff, the
circuit breaker). At start, a server that cannot be reached is a mistake to
report at once, in one line, without the URL (it may hold a password): the
orchestrator restarts the process, and an operator sees why.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.config import Settings
from worker.errors import HandoverUnavailable
from worker.providers.factory import embedding_model
from worker.store.migrate import check_database

CONNECT_TIMEOUT_S = 5.0


async def check_servers(settings: Settings) -> None:
    """Raise StoreUnavailable or HandoverUnavailable when PostgreSQL or Redis does not
    answer, ConfigurationError when the database is not migrated for this code."""
    await check_database(settings.database_url, settings.embed_dim,
                         embed_model=embedding_model(settings), timeout_s=CONNECT_TIMEOUT_S)
    await check_redis(settings)


async def check_redis(settings: Settings) -> None:
    """Raise HandoverUnavailable when Redis does not answer (for the commands that
    need Redis alone: the exporter, the webhook sender)."""
    redis = Redis.from_url(settings.redis_url or "", socket_connect_timeout=CONNECT_TIMEOUT_S,
                           socket_timeout=CONNECT_TIMEOUT_S)
    try:
        await redis.ping()
    except (RedisError, OSError) as exc:
        raise HandoverUnavailable(
            f"Redis (MEMFLEET_REDIS_URL) is unreachable: {type(exc).__name__}") from exc
    finally:
        await redis.aclose()
