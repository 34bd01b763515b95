"""The memory API's /healthz (liveness) and /readyz (readiness) while a server is away.

Redis of the test's own, SIGKILLed and restarted: /readyz answers 503 naming
Redis, then 200 again; /healthz answers 200 throughout. PostgreSQL away (the
test's database dropped under the API): /readyz names PostgreSQL. Neither
answer carries an address or an error text.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.api_server import api_settings, running_api
from tests.helpers import eventually
from worker.config import Settings
from worker.embedded import EmbeddedPostgres, EmbeddedRedis


@pytest.fixture
async def own_redis(tmp_path: Path) -> AsyncIterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "redis", appendonly=True)
    await asyncio.to_thread(server.start)
    yield server
    await asyncio.to_thread(server.stop)


async def answer(api: httpx.AsyncClient, path: str) -> tuple[int, object]:
    reply = await api.get(path)
    return reply.status_code, reply.json()


async def test_readyz_names_the_server_away_and_healthz_stays_alive(
    settings: Settings, own_redis: EmbeddedRedis, pg_server: EmbeddedPostgres,
    database_url: str,
) -> None:
    settings = settings.model_copy(update={"redis_url": own_redis.url})
    async with (running_api(api_settings(settings)) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=10) as api):
        assert await answer(api, "/readyz") == (200, {"status": "ok"})
        assert await answer(api, "/healthz") == (200, {"status": "ok"})

        await asyncio.to_thread(own_redis.kill)

        async def redis_down() -> bool:
            return await answer(api, "/readyz") == (
                503, {"status": "unavailable", "down": ["Redis"]})

        await eventually(redis_down, 10)
        assert await answer(api, "/healthz") == (200, {"status": "ok"})
        await asyncio.to_thread(own_redis.start)

        async def ready() -> bool:
            return (await api.get("/readyz")).status_code == 200

        await eventually(ready, 15)

        admin = await asyncpg.connect(pg_server.url)
        try:
            await admin.execute(
                f"DROP DATABASE {database_url.rsplit('/', 1)[1]} WITH (FORCE)")
        finally:
            await admin.close()

        async def postgres_down() -> bool:
            return await answer(api, "/readyz") == (
                503, {"status": "unavailable", "down": ["PostgreSQL"]})

        await eventually(postgres_down, 10)
        assert await answer(api, "/healthz") == (200, {"status": "ok"})
