"""What every memfleet command shares: how a group adds its commands, the servers they
talk to, the store, times.

Settings are read once by ``worker.cli.main.main`` and passed down here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeAlias

from pydantic import SecretStr

from worker.config import Settings, secret
from worker.errors import ConfigurationError, MemfleetError

# What a group's ``register`` adds its commands to: ``memfleet``'s subcommands.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
# What runs one command, set on its parser as the default of ``handler``: an exit code.
Handler: TypeAlias = Callable[[Settings, argparse.Namespace], int]


def resolve(settings: Settings, *, database: bool = True) -> Settings:
    """Fill in the embedded servers' URLs where none is set (``database``: False for a
    command that needs Redis alone)."""
    if (settings.database_url or not database) and settings.redis_url:
        return settings
    from worker.embedded import ensure_embedded

    settings.home_dir.mkdir(parents=True, exist_ok=True)
    # Each embedded server only where its own URL is unset.
    database_url, redis_url = ensure_embedded(settings.home_dir.resolve(),
                                              postgres=database and not settings.database_url,
                                              redis=not settings.redis_url)
    update: dict[str, Any] = {"database_url": settings.database_url or database_url,
                              "redis_url": settings.redis_url or redis_url}
    if database_url and settings.erase_fence_key is None:
        # The embedded database's fences are keyed with a key kept beside it.
        from worker.store.fence_key import embedded_key

        update["erase_fence_key"] = SecretStr(embedded_key(settings.home_dir.resolve()))
    return settings.model_copy(update=update)


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
