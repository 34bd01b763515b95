"""Unknown service-key ids against real PostgreSQL: a caller presenting random
``mfk_`` ids costs the database a bounded number of transactions, not one each
(the id snapshot and the lookup budget of worker.api.key_cache)."""

from __future__ import annotations

import asyncio
import math
import secrets
import time

import asyncpg
import httpx

from tests.api_server import api_settings, running_api
from tests.integration.api.conftest import key_auth
from worker.api.service_auth import LOOKUPS_PER_WINDOW, UNKNOWN_KEY_TTL_S
from worker.config import Settings
from worker.store.service_keys import ServiceKeyStore

RANDOM_KEYS = 300
# Each query of the API's pool is two transactions: its own, and the reset of the
# connection when the pool takes it back.
PER_QUERY = 2


async def committed(database_url: str) -> int:
    """The database's committed transactions, once every other backend has ended
    (a backend's counts reach pg_stat_database when it goes idle or ends)."""
    conn = await asyncpg.connect(database_url)
    try:
        deadline = time.monotonic() + 10
        while await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"):
            assert time.monotonic() < deadline, "the API's connections did not end"
            await asyncio.sleep(0.05)
        value: int = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        return value
    finally:
        await conn.close()


async def transactions_of(settings: Settings, database_url: str,
                          headers: list[dict[str, str]]) -> tuple[int, float]:
    """Transactions of one API process's life (start, ``headers``' requests one after
    the other, stop), and the seconds the requests took. One after the other: many at
    once would grow the pool, whose new connections cost transactions of their own."""
    before = await committed(database_url)
    async with running_api(api_settings(settings)) as base_url, \
            httpx.AsyncClient(base_url=base_url, timeout=60) as api:
        started = time.monotonic()
        codes = {(await api.get("/users/ada/facts", headers=header)).status_code
                 for header in headers}
        took = time.monotonic() - started
    assert codes <= {401}, codes
    return await committed(database_url) - before, took


async def test_random_unknown_key_ids_cost_a_bounded_number_of_transactions(
    settings: Settings, database_url: str, keys: ServiceKeyStore
) -> None:
    await keys.create("the fleet's chat server", ("read",))
    await keys.aclose()  # its backend ends: its counts are in before the first reading
    idle, _ = await transactions_of(settings, database_url, [])
    random_ids = [key_auth(f"mfk_{secrets.token_hex(6)}_{secrets.token_hex(32)}")
                  for _ in range(RANDOM_KEYS)]
    flooded, took = await transactions_of(settings, database_url, random_ids)
    print(f"transactions: API start and stop {idle}; with {RANDOM_KEYS} random unknown"
          f" key ids {flooded} ({flooded - idle} for the ids, in {took:.1f} s)")
    # Per window: the budget's lookups and one read of the id snapshot.
    windows = math.ceil(took / UNKNOWN_KEY_TTL_S) + 1
    assert flooded - idle <= PER_QUERY * (LOOKUPS_PER_WINDOW + 1) * windows


async def test_a_key_created_a_moment_ago_works_at_once_and_after_a_flood(
    settings: Settings, keys: ServiceKeyStore
) -> None:
    async with running_api(api_settings(settings)) as base_url, \
            httpx.AsyncClient(base_url=base_url, timeout=60) as api:
        flood = [api.get("/users/ada/facts", headers=key_auth(
            f"mfk_{secrets.token_hex(6)}_{secrets.token_hex(32)}")) for _ in range(100)]
        assert {r.status_code for r in await asyncio.gather(*flood)} == {401}
        _, key = await keys.create("created during a flood", ("read",))
        deadline, status = time.monotonic() + 5, 0
        while status != 200 and time.monotonic() < deadline:
            status = (await api.get("/users/ada/facts", headers=key_auth(key))).status_code
            await asyncio.sleep(0.05)
        assert status == 200
        # Without a flood, a new key is looked up at once, however fresh the snapshot.
        await asyncio.sleep(1.5)
        _, quiet = await keys.create("created in a quiet moment", ("read",))
        assert (await api.get("/users/ada/facts", headers=key_auth(quiet))).status_code == 200
