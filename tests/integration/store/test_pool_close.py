"""A process on its way out never hangs on a connection that is not given back.

asyncpg's ``Pool.close`` waits for every acquired connection; a worker's shutdown
(worker.fleet.app) closes its pool after cancelling its server checks, one of which
may hold a connection it never releases. ``close_pool`` waits a bounded time, then
terminates the pool.
"""

from __future__ import annotations

import asyncio
import time

from worker.config import Settings
from worker.store.pool import close_pool, create_pool


async def test_a_pool_with_a_connection_never_released_closes_within_its_bound(
        settings: Settings) -> None:
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
    await pool.acquire()  # never released, as a task cancelled mid-use may leave it
    started = time.monotonic()
    await asyncio.wait_for(close_pool(pool, timeout_s=0.5), 10)
    assert time.monotonic() - started < 5
    assert pool.is_closing()


async def test_a_pool_whose_connections_are_back_closes_at_once(settings: Settings) -> None:
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT 1") == 1
    started = time.monotonic()
    await close_pool(pool, timeout_s=30)
    assert time.monotonic() - started < 5 and pool.is_closing()
