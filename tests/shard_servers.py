"""Two real Redis servers with their append-only files, for the tests of several Redis
primaries (worker.protocol.shards): each test starts its own, so it can SIGKILL them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from worker.config import Settings
from worker.embedded import EmbeddedRedis


@asynccontextmanager
async def aof_servers(tmp_path: Path, *names: str) -> AsyncIterator[dict[str, EmbeddedRedis]]:
    servers = {name: EmbeddedRedis(tmp_path / f"redis-{name}", appendonly=True)
               for name in names}
    try:
        for server in servers.values():
            await asyncio.to_thread(server.start)
        yield servers
    finally:
        for server in servers.values():
            await asyncio.to_thread(server.stop)


def shard_map(servers: dict[str, EmbeddedRedis]) -> str:
    """MEMFLEET_REDIS_SHARDS for ``servers``, in their order."""
    return " ".join(f"{name}={server.url}" for name, server in servers.items())


def sharded(settings: Settings, servers: dict[str, EmbeddedRedis], **states: str) -> Settings:
    """``settings`` with ``servers`` as the shard map (``states``: redis_shards_pending or
    redis_shards_joining), validated as the environment would be."""
    return Settings(**{**settings.model_dump(exclude={"redis_url"}),
                       "redis_shards": shard_map(servers), **states})
