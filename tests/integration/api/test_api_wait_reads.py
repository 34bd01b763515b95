"""The waits' reads of Redis are shared (api_stub.wait_poller), over real HTTP and real
Redis: many waits on one session cost about what one does, and a wait still answers
as soon as a commit covers it (test_api_session_status.py)."""

from __future__ import annotations

import asyncio

import httpx
from redis.asyncio import Redis

from tests.integration.api.conftest import key_auth, new_key
from worker.store.service_keys import ServiceKeyStore

WAITS = 40
WAIT_S = 2.0
# One wait polls about 8 times in 2 s (at once, then 50 ms doubling up to 500 ms), two
# commands each, and reads the status once more at its end: 40 waits polling on their
# own cost about 40 * (8 + 1) * 2 = 720 commands; shared, about 8 * 2 plus the 40 * 2
# end reads, and a few more reads at once as the waits come in.
MAX_COMMANDS = 300


async def commands(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_commands_processed"])


async def test_many_waits_on_one_session_share_its_reads(
    client: httpx.AsyncClient, keys: ServiceKeyStore, redis: Redis,
) -> None:
    auth = key_auth(await new_key(keys, "read"))
    before = await commands(redis)
    answers = await asyncio.gather(*(
        client.get("/users/ada/sessions/s1/handovers/1/wait", params={"timeout_s": WAIT_S},
                   headers=auth) for _ in range(WAITS)))
    spent = await commands(redis) - before - 1  # less the INFO itself
    assert [a.status_code for a in answers] == [200] * WAITS
    assert all(a.json()["covered"] is False for a in answers)
    assert spent < MAX_COMMANDS, spent
