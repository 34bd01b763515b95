"""Notes beside facts through the memory API and the Python clients (docs/notes.md): a real
worker (the `openai` client on the LLM stub) writes them; the API lists, searches,
removes, exports and erases them, each user's alone; the memory tools' search_memory
shows them after the facts, through the executors and through MCP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.api_server import api_settings, bearer, running_api, token
from tests.helpers import say
from tests.integration.mcp.conftest import answer, http_session, mcp_in_process
from tests.openai_stub import openai_settings
from worker.client import AsyncMemoryApi, AsyncMemoryTools, MemoryApi, MemoryTools
from worker.client.memory_tools import NOTES_ABOUT
from worker.config import Settings
from worker.errors import AccessDenied, NotFound
from worker.ops.note_promotion import PromotionPolicy, promotion_pass
from worker.providers.factory import build_note_promoter, build_providers
from worker.store.note_promotion import PostgresNotePromotion
from worker.store.pool import create_pool

RENOVATION = "I'm thinking about a kitchen renovation, budget about $40k."


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    return openai_settings(settings, stub, llm_timeout_s=2.0, notes_enabled=True)


@pytest.fixture
async def api_url(llm: Settings) -> AsyncIterator[str]:
    async with running_api(api_settings(llm, read_notes_top_k=2)) as url:
        yield url


@pytest.fixture
async def api(api_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api_url, timeout=30) as client:
        yield client


async def listed(api: httpx.AsyncClient, user: str, state: str = "active") -> list[dict[str, Any]]:
    resp = await api.get(f"/users/{user}/notes", params={"state": state}, headers=bearer(user))
    assert resp.status_code == 200, resp.text
    notes: list[dict[str, Any]] = resp.json()["notes"]
    return notes


async def test_notes_are_listed_searched_and_read_for_a_prompt_each_users_alone(
    llm: Settings, redis: Redis, api: httpx.AsyncClient,
) -> None:
    await say(llm, redis, "ada", "s1", "I live in Oslo.", RENOVATION)
    await say(llm, redis, "bob", "s1", "I'm considering learning the cello.")
    (note,) = await listed(api, "ada")
    assert note["text"] == "The user is thinking about a kitchen renovation, budget about $40k."
    assert (note["source_session_id"], note["superseded_reason"]) == ("s1", None)
    # Another user's token reaches none of them, and bob's own list holds only his.
    assert (await api.get("/users/ada/notes", headers=bearer("bob"))).status_code == 403
    assert [n["text"] for n in await listed(api, "bob")] == [
        "The user is considering learning the cello."]
    found = await api.get("/users/ada/search", params={"q": "kitchen renovation"},
                          headers=bearer("ada"))
    assert found.status_code == 200
    (hit,) = found.json()["notes"]
    assert hit["kind"] == "note" and hit["note"]["id"] == note["id"]
    assert all("renovation" not in r["fact"]["text"] for r in found.json()["results"])
    bobs = await api.get("/users/bob/search", params={"q": "kitchen renovation"},
                         headers=bearer("bob"))
    assert all(h["note"]["text"].endswith("cello.") for h in bobs.json()["notes"])
    # As of a time: facts only (notes have no valid time).
    as_of = await api.get("/users/ada/search", headers=bearer("ada"), params={
        "q": "kitchen", "known_at": "2099-01-01T00:00:00Z"})
    assert as_of.json()["notes"] == []
    # An agent's relationship alone: notes are the user's, none of them.
    related = await api.get("/users/ada/search", headers=bearer("ada"), params={
        "q": "kitchen", "scope": "relationship", "agent_id": "luna"})
    assert related.json()["notes"] == []
    block = (await api.get("/users/ada/known-facts", params={"q": "the kitchen renovation"},
                           headers=bearer("ada"))).json()["block"]
    facts, section = block.split("\n\n")
    assert "Lives in Oslo" in facts
    assert section.startswith("Notes about the user") and "kitchen renovation" in section
    without_query = (await api.get("/users/ada/known-facts", headers=bearer("ada"))).json()
    assert "Notes about" not in without_query["block"]
    # Memory off: the user still sees the notes; a prompt's read carries none.
    await api.put("/users/ada/consent", json={"enabled": False}, headers=bearer("ada"))
    assert len(await listed(api, "ada")) == 1
    off = (await api.get("/users/ada/known-facts", params={"q": "the kitchen renovation"},
                         headers=bearer("ada"))).json()
    assert off["block"] == ""


async def test_a_note_is_removed_never_deleted_and_goes_with_an_erase_and_export(
    llm: Settings, redis: Redis, api: httpx.AsyncClient,
) -> None:
    await say(llm, redis, "cy", "s1", RENOVATION)
    await say(llm, redis, "dee", "s1", RENOVATION)
    (note,) = await listed(api, "cy")
    (dees,) = await listed(api, "dee")
    assert (await api.delete(f"/users/cy/notes/{dees['id']}",
                             headers=bearer("cy"))).status_code == 404, "another user's note"
    removed = await api.delete(f"/users/cy/notes/{note['id']}", headers=bearer("cy"))
    assert removed.status_code == 200
    assert removed.json()["superseded_reason"] == "removed"
    assert (await api.delete(f"/users/cy/notes/{note['id']}",
                             headers=bearer("cy"))).status_code == 404, "removed once"
    assert await listed(api, "cy") == []
    assert [n["superseded_reason"] for n in await listed(api, "cy", "all")] == ["removed"]
    assert len(await listed(api, "dee")) == 1
    export = (await api.get("/users/cy/export", headers=bearer("cy"))).json()
    assert [(n["id"], n["superseded_reason"]) for n in export["notes"]] == [
        (note["id"], "removed")]
    assert "embedding" not in export["notes"][0]
    erased = await api.delete("/users/cy", headers=bearer("cy"))
    assert erased.json()["deleted"]["memory_note"] == 1
    assert await listed(api, "cy", "all") == []
    assert len(await listed(api, "dee")) == 1


async def test_the_python_clients_read_remove_and_trace_notes(
    llm: Settings, redis: Redis, api_url: str, database_url: str,
) -> None:
    for session in ("s1", "s2", "s3"):
        await say(llm, redis, "eve", session, RENOVATION)
    await say(llm, redis, "eve", "s4", "I'm considering moving to Porto.")
    pool = await create_pool(database_url, min_size=1, max_size=2)
    promoter, providers = build_note_promoter(llm), build_providers(llm)
    try:
        report = await promotion_pass(PostgresNotePromotion(pool), promoter, providers.embedder,
                                      PromotionPolicy.from_settings(llm))
    finally:
        await promoter.aclose()
        await providers.aclose()
        await pool.close()
    (fact_id,) = report.fact_ids

    def blocking() -> None:
        with MemoryApi(api_url, token=lambda: token("eve"), timeout_s=30) as eve:
            (porto,) = eve.notes("eve")
            assert porto.text == "The user is considering moving to Porto."
            assert [n.promoted_to for n in eve.fact_notes("eve", fact_id)] == [fact_id] * 3
            assert {n.superseded_reason for n in eve.notes("eve", "all")} == {
                "promoted", None}
            results = eve.search("eve", "moving to Porto")
            assert results.notes and results.notes[0].kind == "note"
            assert results.notes[0].note.id == porto.id
            assert eve.remove_note("eve", porto.id).superseded_reason == "removed"
            with pytest.raises(NotFound):
                eve.remove_note("eve", porto.id)
            with pytest.raises(AccessDenied):
                eve.notes("frank")
            assert eve.export("eve").notes

    await asyncio.to_thread(blocking)
    async with AsyncMemoryApi(api_url, token=lambda: token("eve"), timeout_s=30) as eve:
        assert await eve.notes("eve") == []
        assert len(await eve.fact_notes("eve", fact_id)) == 3


async def test_search_memory_shows_the_note_after_the_facts_in_the_tools_and_over_mcp(
    llm: Settings, redis: Redis, api: httpx.AsyncClient, api_url: str,
) -> None:
    await say(llm, redis, "gus", "s1", "I live in Oslo.", RENOVATION)
    (note,) = await listed(api, "gus")
    query = {"query": "kitchen renovation"}

    def blocking() -> str:
        with MemoryApi(api_url, token=lambda: token("gus"), timeout_s=30) as gus:
            return MemoryTools(gus, user_id="gus", agent_id="coach").run("search_memory", query)

    text = await asyncio.to_thread(blocking)
    found = json.loads(text)
    assert list(found) == ["ok", "results", "notes"]
    assert found["notes"] == {"about": NOTES_ABOUT, "items": [
        {"text": "The user is thinking about a kitchen renovation, budget about $40k.",
         "said_on": note["observed_at"][:10]}]}
    assert all("renovation" not in r["text"] for r in found["results"]), "never a fact"
    async with AsyncMemoryApi(api_url, token=lambda: token("gus"), timeout_s=30) as gus:
        assert await AsyncMemoryTools(gus, user_id="gus").run("search_memory", query) == text
    # The MCP server runs the same executor: the same answer.
    async with mcp_in_process(api_url, max_sessions=2) as url, \
            http_session(url, bearer("gus")) as mcp:
        assert answer(await mcp.call_tool("search_memory", query)) == found
    # Memory off: the tool reads nothing, notes neither.
    await api.put("/users/gus/consent", json={"enabled": False}, headers=bearer("gus"))
    off = json.loads(await asyncio.to_thread(blocking))
    assert off["error"] == "memory_off" and "notes" not in off
