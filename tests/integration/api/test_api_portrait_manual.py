"""The portrait follows the user's manual writes through the memory API (docs/portrait.md,
"When it is refreshed"): the memory API over real HTTP, a real burst worker on the
LLM stub (the `openai` client; the stub's portrait is the rules provider's), PostgreSQL
and Redis.

- A fact removed through the API is gone from the portrait the worker writes next,
  with no conversation in between.
- Every manual write that changes the user's facts queues a refresh the way a commit
  does (the user's refresh state in Redis, one job on the llm's queue, joined when
  one waits): add, correct, pin, unpin, a held change accepted, a fact moved to a
  person, two persons merged. A write that changes nothing (a fact moved to the person
  it is about already) and a read queue none.
- With portraits off, a manual write queues nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.api_server import api_settings, bearer, running_api
from tests.helpers import drain, say
from tests.openai_stub import openai_settings
from worker.config import Settings
from worker.protocol.keys import user_portrait_key


@pytest.fixture
def api_fleet(llm: Settings) -> Settings:
    """The API on the workers' settings (the LLM stub's)."""
    return llm


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    """Workers and API on the stub, portraits on and refreshed after each commit."""
    return openai_settings(settings, stub, llm_timeout_s=5.0, portrait_enabled=True,
                           portrait_min_interval=0.0)


async def portrait(api: httpx.AsyncClient, user: str) -> dict[str, Any]:
    shown = await api.get(f"/users/{user}/portrait", headers=bearer(user))
    assert shown.status_code == 200, shown.text
    body: dict[str, Any] = shown.json()["portrait"]
    return body


async def fact_id(api: httpx.AsyncClient, user: str, text: str) -> int:
    listed = (await api.get(f"/users/{user}/facts", headers=bearer(user))).json()
    (found,) = [f["id"] for g in listed["groups"] for f in g["facts"] if f["text"] == text]
    return int(found)


async def refresh_queued(redis: Redis, settings: Settings, user: str) -> bool:
    """A refresh of the user's portrait waits on the llm's queue."""
    job = await redis.hget(user_portrait_key(user), "j")
    return job is not None and await redis.zscore(settings.queue_name, job) is not None


def portrait_calls(stub: StubServer) -> int:
    return len([r for r in stub.recorded() if "user_portrait" in str(r["body"])])


async def test_a_fact_removed_through_the_api_leaves_the_portrait(
    api: httpx.AsyncClient, llm: Settings, redis: Redis, stub: StubServer,
) -> None:
    await say(llm, redis, "ada", "s1", "I live in Oslo.", "I use Go.")
    first = await portrait(api, "ada")
    assert (first["version"], first["text"]) == (1, "The user lives in Oslo. The user uses Go.")
    assert not await refresh_queued(redis, llm, "ada")

    oslo = await fact_id(api, "ada", "Lives in Oslo")
    removed = await api.delete(f"/users/ada/facts/{oslo}", headers=bearer("ada"))
    assert removed.status_code == 200, removed.text
    assert await refresh_queued(redis, llm, "ada"), "the removal queued a refresh"
    calls = portrait_calls(stub)
    assert (await asyncio.wait_for(drain(llm), 60))["failed"] == 0  # no conversation
    second = await portrait(api, "ada")
    assert (second["version"], second["text"]) == (2, "The user uses Go.")
    assert portrait_calls(stub) == calls + 1


async def test_every_manual_write_that_changes_facts_queues_a_refresh(
    api: httpx.AsyncClient, llm: Settings, redis: Redis, stub: StubServer,
) -> None:
    user, auth = "bo", bearer("bo")
    await say(llm, redis, user, "s1", "I live in Oslo.")
    assert (await portrait(api, user))["version"] == 1

    async def queued_by(method: str, path: str, body: Any = None) -> httpx.Response:
        assert not await refresh_queued(redis, llm, user)
        answer = await api.request(method, f"/users/{user}{path}", headers=auth, json=body)
        assert answer.status_code in (200, 201), answer.text
        assert await refresh_queued(redis, llm, user), f"{method} {path} queued no refresh"
        assert (await asyncio.wait_for(drain(llm), 60))["failed"] == 0
        return answer

    added = (await queued_by("POST", "/facts", {"text": "Plays the cello"})).json()
    assert "cello" in (await portrait(api, user))["text"]
    edited = (await queued_by("PATCH", f"/facts/{added['id']}",
                              {"text": "Plays the viola"})).json()
    assert "viola" in (await portrait(api, user))["text"]
    # Pinning changes no fact the portrait is made from: the refresh costs no model call.
    calls, version = portrait_calls(stub), (await portrait(api, user))["version"]
    await queued_by("PUT", f"/facts/{edited['id']}/pin")
    assert (portrait_calls(stub), (await portrait(api, user))["version"]) == (calls, version)
    await queued_by("DELETE", f"/facts/{edited['id']}/pin")

    # A held change (the fact is pinned), accepted by the user.
    oslo = await fact_id(api, user, "Lives in Oslo")
    await queued_by("PUT", f"/facts/{oslo}/pin")
    await say(llm, redis, user, "s2", "I live in Oslo.", "I just moved to Madrid.")
    (held,) = (await api.get(f"/users/{user}/held-proposals", headers=auth)).json()["proposals"]
    await queued_by("POST", f"/held-proposals/{held['id']}/accept")
    assert "Madrid" in (await portrait(api, user))["text"]

    # A fact moved to a person leaves the user's portrait; a merge moves its facts again.
    ana = (await api.post(f"/users/{user}/persons", headers=auth,
                          json={"display_name": "Ana", "relation": "sister"})).json()
    viola = await fact_id(api, user, "Plays the viola")
    moved = (await queued_by("PUT", f"/facts/{viola}/person", {"person_id": ana["id"]})).json()
    assert "viola" not in (await portrait(api, user))["text"]
    same = await api.put(f"/users/{user}/facts/{moved['id']}/person", headers=auth,
                         json={"person_id": ana["id"]})
    assert same.status_code == 200, same.text
    assert not await refresh_queued(redis, llm, user), "nothing changed, nothing queued"
    leo = (await api.post(f"/users/{user}/persons", headers=auth,
                          json={"display_name": "Leo"})).json()
    await queued_by("POST", f"/persons/{ana['id']}/merge", {"into": leo["id"]})

    # Reads queue nothing.
    await api.get(f"/users/{user}/facts", headers=auth)
    await api.get(f"/users/{user}/search", headers=auth, params={"q": "Madrid"})
    assert not await refresh_queued(redis, llm, user)


async def test_with_portraits_off_a_manual_write_queues_nothing(
    settings: Settings, stub: StubServer, redis: Redis,
) -> None:
    off = openai_settings(settings, stub, llm_timeout_s=5.0)
    async with running_api(api_settings(off)) as base_url, \
            httpx.AsyncClient(base_url=base_url, timeout=30) as api:
        added = await api.post("/users/cy/facts", headers=bearer("cy"),
                               json={"text": "Lives in Rome"})
        assert added.status_code == 201, added.text
        removed = await api.delete(f"/users/cy/facts/{added.json()['id']}",
                                   headers=bearer("cy"))
        assert removed.status_code == 200
    assert not await redis.exists(user_portrait_key("cy"))
    assert await redis.zcard(off.queue_name) == 0
