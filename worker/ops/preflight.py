"""A process's first contact with its servers, before it starts serving.

Once running, workers and the API ride out outages (retries, backoff, the
circuit breaker). At start, a server that cannot be reached is a mistake to
report at once, in one line that names the server but never the URL's credentials,
and says what to check: the orchestrator restarts the process, and an operator sees why.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import AuthenticationError, RedisError, ResponseError

from worker.config import Settings
from worker.errors import HandoverUnavailable
from worker.providers.factory import embedding_model
from worker.server_address import address, network_reason, unreachable
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
    need Redis alone: the exporter, the webhook sender); with a shard map, when any
    shard does not."""
    setting = "MEMFLEET_REDIS_SHARDS" if settings.redis_shards else "MEMFLEET_REDIS_URL"
    for name, url in settings.redis_shard_entries or ((None, settings.redis_url),):
        redis = Redis.from_url(url or "", socket_connect_timeout=CONNECT_TIMEOUT_S,
                               socket_timeout=CONNECT_TIMEOUT_S)
        try:
            await redis.ping()
        except (RedisError, OSError) as exc:
            failure = redis_failure(url, exc, setting)
            if settings.redis_shards:
                failure = f"shard {name}: {failure}"
            raise HandoverUnavailable(failure) from exc
        finally:
            await redis.aclose()


def redis_failure(url: str | None, exc: BaseException,
                  setting: str = "MEMFLEET_REDIS_URL") -> str:
    """Why Redis at ``url`` did not answer PING, in one line that names the server (never
    the URL's credentials) and what to check."""
    if isinstance(exc, AuthenticationError) or (
            isinstance(exc, ResponseError) and str(exc).startswith(("NOAUTH", "WRONGPASS"))):
        return (f"Redis at {address(url)} refused the login ({type(exc).__name__}): check the "
                f"user and password in {setting}")
    reason = network_reason(exc)
    if reason is None:  # it answered, but not as Redis does (another server on that port)
        reason = f"{type(exc).__name__}: is it a Redis server?"
    return unreachable("Redis", setting, url, reason)
