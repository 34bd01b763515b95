"""The user's portrait over HTTP (docs/portrait.md): the memory API served over real
HTTP, conversations handed over with the chat server's call, burst workers committing
through the real `openai` client against the stub, PostgreSQL and Redis.

GET shows the portrait with its version as the ETag (304 to If-None-Match) and why
there is none; another user's token is refused and a service key reads only with
`read`; DELETE removes it (no portrait until the user asks again, POST .../refresh);
the stable block opens with it behind MEMFLEET_READ_STABLE_PORTRAIT and its version
follows the portrait; the export carries every version, the erase removes them;
memory off shows none. The Python client's methods are used against the same API.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.api_server import bearer, new_key
from tests.helpers import drain, say
from tests.integration.api.conftest import key_auth
from tests.openai_stub import openai_settings
from worker.client import AsyncMemoryApi
from worker.config import Settings
from worker.read_split import PORTRAIT_HEADER
from worker.store.service_keys import ServiceKeyStore


@pytest.fixture
def api_fleet(llm: Settings) -> Settings:
    """The API on the workers' settings (the LLM stub's)."""
    return llm


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    """Workers and API on the stub, portraits on and refreshed after each commit."""
    return openai_settings(settings, stub, llm_timeout_s=5.0, portrait_enabled=True,
                           portrait_min_interval=0.0, read_stable_portrait=True)


async def test_the_portrait_is_served_with_its_version_and_follows_the_facts(
    api: httpx.AsyncClient, llm: Settings, redis: Redis
) -> None:
    none = await api.get("/users/ada/portrait", headers=bearer("ada"))
    assert none.status_code == 200 and none.json() == {
        "user_id": "ada", "state": "none", "portrait": None}
    assert none.headers["ETag"] == '"none"'
    await say(llm, redis, "ada", "s1", "I live in Oslo.")
    first = await api.get("/users/ada/portrait", headers=bearer("ada"))
    body = first.json()
    assert body["state"] == "current" and first.headers["ETag"] == '"1"'
    assert body["portrait"]["text"] == "The user lives in Oslo."
    assert body["portrait"]["fact_count"] == 1
    same = await api.get("/users/ada/portrait",
                         headers={**bearer("ada"), "If-None-Match": '"1"'})
    assert same.status_code == 304 and same.content == b""
    # The stable block opens with it; its version changes with the portrait.
    stable = (await api.get("/users/ada/stable-block", headers=bearer("ada"))).json()
    assert stable["block"].startswith(PORTRAIT_HEADER + "\nThe user lives in Oslo.\n\n")
    await say(llm, redis, "ada", "s2", "I moved to Madrid.")
    second = await api.get("/users/ada/portrait",
                           headers={**bearer("ada"), "If-None-Match": '"1"'})
    assert second.status_code == 200 and second.headers["ETag"] == '"2"'
    assert "Madrid" in second.json()["portrait"]["text"]
    moved = (await api.get("/users/ada/stable-block", headers=bearer("ada"))).json()
    assert moved["version"] != stable["version"]
    assert "Oslo" not in moved["block"].split("\n\n", 1)[0]


async def test_another_user_and_a_key_out_of_scope_cannot_read_or_remove_it(
    api: httpx.AsyncClient, llm: Settings, redis: Redis, keys: ServiceKeyStore
) -> None:
    await say(llm, redis, "ada", "s1", "I live in Oslo.")
    for method in ("GET", "DELETE"):
        refused = await api.request(method, "/users/ada/portrait", headers=bearer("bob"))
        assert refused.status_code == 403
    asked = await api.post("/users/ada/portrait/refresh", headers=bearer("bob"))
    assert asked.status_code == 403
    reader = key_auth(await new_key(keys, "read"))
    assert (await api.get("/users/ada/portrait", headers=reader)).json()["state"] == "current"
    assert (await api.delete("/users/ada/portrait", headers=reader)).status_code == 403
    bob = (await api.get("/users/bob/portrait", headers=bearer("bob"))).json()
    assert bob == {"user_id": "bob", "state": "none", "portrait": None}


async def test_removed_it_stays_removed_until_asked_again_through_the_client(
    api: httpx.AsyncClient, llm: Settings, redis: Redis, keys: ServiceKeyStore,
    stub: StubServer
) -> None:
    await say(llm, redis, "cy", "s1", "I live in Rome.")
    admin = await new_key(keys, "admin", "read")
    async with AsyncMemoryApi(str(api.base_url), service_key=admin) as client:
        shown = await client.portrait("cy")
        assert shown is not None and shown.portrait is not None and shown.tag == "1"
        assert await client.portrait("cy", known_tag="1") is None
        assert await client.remove_portrait("cy") == 1
        assert await client.remove_portrait("cy") is None
        removed = await client.portrait("cy")
        assert removed is not None and (removed.state, removed.portrait) == ("removed", None)
        stable = (await api.get("/users/cy/stable-block", headers=bearer("cy"))).json()
        assert PORTRAIT_HEADER not in stable["block"]
        calls = len([r for r in stub.recorded() if "user_portrait" in str(r["body"])])
        await say(llm, redis, "cy", "s2", "I use Go.")
        assert (await client.portrait("cy")).state == "removed"  # type: ignore[union-attr]
        assert len([r for r in stub.recorded() if "user_portrait" in str(r["body"])]) == calls
        assert await client.refresh_portrait("cy") is True
        await asyncio.wait_for(drain(llm), 60)
        again = await client.portrait("cy")
        assert again is not None and again.portrait is not None
        assert (again.portrait.version, again.portrait.text) == (
            2, "The user lives in Rome. The user uses Go.")


async def test_export_carries_it_erase_removes_it_and_memory_off_shows_none(
    api: httpx.AsyncClient, llm: Settings, redis: Redis
) -> None:
    await say(llm, redis, "di", "s1", "I live in Lima.")
    await say(llm, redis, "di", "s2", "I like chess.")
    export = (await api.get("/users/di/export", headers=bearer("di"))).json()
    assert [p["version"] for p in export["portraits"]] == [1, 2]
    assert export["portraits"][0]["superseded_at"] is not None
    off = await api.put("/users/di/consent", headers=bearer("di"), json={"enabled": False})
    assert off.status_code == 200, off.text
    shown = await api.get("/users/di/portrait", headers=bearer("di"))
    assert (shown.json()["state"], shown.headers["ETag"]) == ("off", '"off"')
    await api.put("/users/di/consent", headers=bearer("di"), json={"enabled": True})
    erased = (await api.delete("/users/di", headers=bearer("di"))).json()
    assert erased["deleted"]["memory_portrait"] == 2
    assert (await api.get("/users/di/export", headers=bearer("di"))).json()["portraits"] == []
    assert (await api.get("/users/di/portrait", headers=bearer("di"))).json()["state"] == "none"
