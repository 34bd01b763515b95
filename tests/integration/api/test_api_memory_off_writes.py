"""An add asked only while the user's memory is on (``if_memory_on``: the memory
tools' saves) on real PostgreSQL and the API over HTTP: refused with 409 MemoryOff
and nothing stored or embedded while memory is off, and fenced against a consent
change in flight: the check is in the write's own transaction, under the user's
lock, so memory turned off while the write waits stores nothing (issue 41)."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx
import numpy as np
import pytest

from api_stub.llm_stub import StubServer
from tests.api_server import bearer
from tests.helpers import fences_for_tests
from worker.client import MemoryApi, MemoryOff
from worker.errors import MemoryOptedOut
from worker.store.postgres import PostgresStore
from worker.store.types import ConsentGate, NewFact

LOCK_USER = "SELECT pg_advisory_xact_lock(hashtextextended('memfleet:user:' || $1, 0))"
SET_OFF = ("INSERT INTO user_memory_consent (user_id, enabled) VALUES ($1, false)"
           " ON CONFLICT (user_id) DO UPDATE SET enabled = false")


def _embeddings(stub: StubServer) -> int:
    return sum(1 for r in stub.state.recorded() if r["path"].endswith("/embeddings"))


async def test_memory_off_the_guarded_add_is_409_memory_off_and_nothing_is_embedded(
    client: httpx.AsyncClient, stub: StubServer,
) -> None:
    headers = bearer("ada")
    assert (await client.put("/users/ada/consent", json={"enabled": False},
                             headers=headers)).status_code == 200
    before = _embeddings(stub)
    refused = await client.post("/users/ada/facts", headers=headers,
                                json={"text": "Likes green tea", "if_memory_on": True})
    assert refused.status_code == 409, refused.text
    assert refused.json() == {"detail": "the user's memory is off: nothing was stored",
                              "error": "MemoryOff"}
    assert _embeddings(stub) == before, "memory off: the words went to no model"
    listed = (await client.get("/users/ada/facts", headers=headers)).json()
    assert listed["count"] == 0
    # Without the flag, a user's own add by hand is stored whatever the consent.
    plain = await client.post("/users/ada/facts", headers=headers,
                              json={"text": "Likes green tea"})
    assert plain.status_code == 201, plain.text
    # On again: the guarded add is stored.
    assert (await client.put("/users/ada/consent", json={"enabled": True},
                             headers=headers)).status_code == 200
    kept = await client.post("/users/ada/facts", headers=headers,
                             json={"text": "Drinks oolong", "if_memory_on": True})
    assert kept.status_code == 201, kept.text


async def test_the_python_client_raises_memory_off_and_the_tool_says_so(
    client: httpx.AsyncClient,
) -> None:
    url = str(client.base_url).rstrip("/")
    token = bearer("bo")["Authorization"].removeprefix("Bearer ")
    assert (await client.put("/users/bo/consent", json={"enabled": False},
                             headers=bearer("bo"))).status_code == 200
    with MemoryApi(url, token=token) as api:
        with pytest.raises(MemoryOff, match="memory is off"):
            await asyncio.to_thread(api.add_fact, "bo", "Likes tea", if_memory_on=True)
        assert (await asyncio.to_thread(api.facts, "bo")).count == 0


async def test_memory_turned_off_while_a_guarded_add_waits_stores_nothing(
    database_url: str,
) -> None:
    """A consent change in flight holds the user's lock: the guarded add waits for it,
    then reads the consent it committed and writes nothing. Checked before the write
    and not under the lock (as the tools did), it would have stored the fact."""
    store = await PostgresStore.connect(database_url, fences=fences_for_tests())
    changer = await asyncpg.connect(database_url)
    fact = NewFact("Likes green tea", "preference", 5, np.ones(8, dtype=np.float32), "test")
    gate = ConsentGate(memory_default=True)
    try:
        await store.add_fact("ada", NewFact("Lives in Lisbon", "fact", 5,
                                            np.ones(8, dtype=np.float32), "test"))
        change = changer.transaction()
        await change.start()
        await changer.execute(LOCK_USER, "ada")
        adding = asyncio.create_task(store.add_fact("ada", fact, if_memory_on=gate))
        await asyncio.sleep(0.5)
        assert not adding.done(), "the guarded add waits for the consent change"
        await changer.execute(SET_OFF, "ada")
        await change.commit()
        with pytest.raises(MemoryOptedOut):
            await asyncio.wait_for(adding, 10)
        assert [f.text for f in await store.facts("ada")] == ["Lives in Lisbon"]
        # An unguarded add (the user's own, by hand) is not held back by the consent.
        await store.add_fact("ada", fact)
        assert len(await store.facts("ada")) == 2
        # Another user's guarded add does not wait for ada's lock.
        lock = changer.transaction()
        await lock.start()
        await changer.execute(LOCK_USER, "ada")
        try:
            await asyncio.wait_for(store.add_fact("bob", fact, if_memory_on=gate), 5)
        finally:
            await lock.rollback()
    finally:
        await changer.close()
        await store.aclose()
