"""What every memfleet command shares: how a group adds its commands, the servers they
talk to, the store, times.

Settings are read once by ``worker.cli.main.main`` and passed down here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeAlias, TypeVar

from pydantic import SecretStr

from worker.config import Settings, secret
from worker.errors import ConfigurationError, MemfleetError

# What a group's ``register`` adds its commands to: ``memfleet``'s subcommands.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
# What runs one command, set on its parser as the default of ``handler``: an exit code.
Handler: TypeAlias = Callable[[Settings, argparse.Namespace], int]
# Settings or a subclass (the API's own, worker.api.settings.ApiSettings): kept as given.
AnySettings = TypeVar("AnySettings", bound=Settings)


def resolve(settings: AnySettings, *, database: bool = True,
            create: bool = False) -> AnySettings:
    """Fill in the embedded servers' URLs where none is set (``database``: False for a
    command that needs Redis alone), and say so on stderr.

    Only ``create`` (`memfleet up`, `memfleet dev`, the demo) makes or starts servers:
    any other command refuses where none were made, since an unset URL more likely
    means a forgotten MEMFLEET_DATABASE_URL than a wish for a new, empty fleet in this
    directory, and where they are stopped, since a stop (`memfleet down`) is meant to
    last: a server that comes back as the side effect of a listing would be a surprise.
    """
    postgres, redis = database and not settings.database_url, not settings.redis_url
    if not (postgres or redis):
        return settings
    from worker.embedded import embedded_made, embedded_running, ensure_embedded

    home = settings.home_dir.resolve()
    unset = " and ".join(name for name, missing in (("MEMFLEET_DATABASE_URL", postgres),
                                                    ("MEMFLEET_REDIS_URL", redis)) if missing)
    servers = _servers(postgres, redis)
    made = embedded_made(home, postgres=postgres, redis=redis)
    if not made and not create:
        raise MemfleetError(f"{unset} unset and no embedded {servers} under {home}: run "
                            f"`memfleet up` first to make them there, or set {unset}")
    running = made and embedded_running(home, postgres=postgres, redis=redis)
    if made and not running and not create:
        which = _stopped(home, postgres=postgres, redis=redis)
        are, them = ("are", "them") if all(which) else ("is", "it")
        raise MemfleetError(f"the embedded {_servers(*which)} under {home} {are} stopped: "
                            f"`memfleet up` starts {them} again (or set {unset})")
    home.mkdir(parents=True, exist_ok=True)
    # Each embedded server only where its own URL is unset.
    database_url, redis_url = ensure_embedded(home, postgres=postgres, redis=redis)
    # They outlive this command (other commands, workers, may be using them): said, so
    # that nobody wonders what keeps running, or which database a command used.
    done = "using" if running else "started" if made else "made and started"
    print(f"memfleet: {unset} unset: {done} the embedded {servers} under {home}; "
          "`memfleet down` stops them", file=sys.stderr, flush=True)
    update: dict[str, Any] = {"database_url": settings.database_url or database_url,
                              "redis_url": settings.redis_url or redis_url}
    if database_url and settings.erase_fence_key is None:
        # The embedded database's fences are keyed with a key kept beside it.
        from worker.store.fence_key import embedded_key

        update["erase_fence_key"] = SecretStr(embedded_key(home))
    return settings.model_copy(update=update)


def open_redis(settings: Settings, **options: Any) -> Any:
    """The fleet's Redis for a command that acts on users: MEMFLEET_REDIS_URL's client, or
    with a shard map a ShardedRedis (worker.protocol.shards) that routes each user."""
    if not settings.redis_shards:
        from redis.asyncio import Redis

        return Redis.from_url(settings.redis_url or "", **options)
    from worker.protocol.shards import ShardedRedis

    return ShardedRedis.from_settings(settings, **options)


def _stopped(home: Any, *, postgres: bool, redis: bool) -> tuple[bool, bool]:
    """Which of the servers asked for are made under ``home`` and not running now."""
    from worker.embedded import embedded_running

    return (postgres and not embedded_running(home, postgres=True, redis=False),
            redis and not embedded_running(home, postgres=False, redis=True))


def _servers(postgres: bool, redis: bool) -> str:
    return "PostgreSQL and Redis" if postgres and redis else "PostgreSQL" if postgres else "Redis"


# Python's logging levels; `--log-level` takes them in any case.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default="INFO",
                        help="the least severe log lines written to stderr, in any case "
                             "(default: INFO)")


async def with_store(settings: Settings, use: Any) -> Any:
    from worker.store.fence_key import fence_keys
    from worker.store.postgres import PostgresStore

    # Without a key, commands that only read or write facts by hand still work.
    try:
        fences = fence_keys(secret(settings.erase_fence_key), settings.home_dir)
    except ConfigurationError:
        fences = None
    store = await PostgresStore.connect(settings.database_url or "", fences=fences)
    try:
        return await use(store)
    finally:
        await store.aclose()


def moment(flag: str, value: str | None) -> datetime | None:
    """An ISO date or time; one without a zone is UTC."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise MemfleetError(f"{flag} needs an ISO date or time, such as 2026-10-15 or "
                            "2026-10-15T09:30:00+02:00") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
