"""A candidate about one of the user's persons that consolidation could not decide about
is held for the user with its person (docs/persons.md, docs/memory_model.md "Undecided
candidates"), end to end: hand-overs through Redis to a burst worker on the real
`openai` client and the LLM stub (every consolidation answer names a target it was not
shown), into PostgreSQL; then the memory API over HTTP. Accepted, the fact is that
person's, never the user's; another user neither sees nor answers it; a merge moves it
with the person's facts; an erase removes it."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.api_server import bearer, token
from tests.helpers import runs, say
from tests.integration.api.test_api_memory_model import listed
from tests.openai_stub import openai_settings
from worker.client import AsyncMemoryApi
from worker.config import Settings

VEGAN = "The user's sister Ana is vegan"


@pytest.fixture
def api_fleet(llm: Settings) -> Settings:
    """The API on the workers' settings (the LLM stub's)."""
    return llm


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    # Persons on (off by default); a job's one more try when the answers stay unusable.
    return openai_settings(settings, stub, extract_model="stub-extract",
                           consolidate_model="stub-consolidate", llm_timeout_s=2.0,
                           llm_retry_after_cap_s=2.0, max_tries=4, persons=True)


async def persons(api: httpx.AsyncClient, user: str) -> list[dict[str, Any]]:
    resp = await api.get(f"/users/{user}/persons", headers=bearer(user))
    assert resp.status_code == 200, resp.text
    found: list[dict[str, Any]] = resp.json()["persons"]
    return found


async def held(api: httpx.AsyncClient, user: str, state: str = "open") -> list[dict[str, Any]]:
    resp = await api.get(f"/users/{user}/held-proposals", params={"state": state},
                         headers=bearer(user))
    assert resp.status_code == 200, resp.text
    proposals: list[dict[str, Any]] = resp.json()["proposals"]
    return proposals


async def undecided_about_ana(llm: Settings, redis: Redis, stub: StubServer,
                              user: str) -> None:
    """Ana's first fact, then a second one about her that consolidation cannot file."""
    await say(llm, redis, user, "s1", "My sister Ana is vegetarian.")
    stub.add_fault("unknown_ids", count=100, path=CHAT_PATH, task="memory_consolidation")
    await say(llm, redis, user, "s2", "My sister Ana is vegan.")
    stub.reset()


async def test_a_held_addition_about_a_person_is_accepted_as_theirs(
    llm: Settings, redis: Redis, api: httpx.AsyncClient, stub: StubServer,
    db: asyncpg.Connection,
) -> None:
    await undecided_about_ana(llm, redis, stub, "ada")
    (ana,) = await persons(api, "ada")
    assert [f["text"] for f in ana["facts"]] == ["The user's sister Ana is vegetarian"]
    last = (await runs(db, "s2", "ada"))[-1]
    assert (last["outcome"], last["rejected"], last["held"], last["added"]) == (
        "committed", 1, 1, 0), "held, no longer dropped"
    (proposal,) = await held(api, "ada")
    assert (proposal["event"], proposal["reason"], proposal["fact_id"], proposal["text"],
            proposal["person_id"]) == ("ADD", "undecided", None, VEGAN, ana["id"])

    # Another user neither sees nor answers it; their token on ada's routes is refused.
    bob = bearer("bob")
    assert await held(api, "bob", "all") == []
    for path in (f"/users/bob/held-proposals/{proposal['id']}/accept",
                 f"/users/bob/held-proposals/{proposal['id']}/dismiss"):
        assert (await api.post(path, headers=bob)).status_code == 404, path
    assert (await api.post(f"/users/ada/held-proposals/{proposal['id']}/accept",
                           headers=bob)).status_code == 403
    assert (await held(api, "ada"))[0]["resolution"] is None

    # Accepted: Ana's fact, never the user's.
    accepted = await api.post(f"/users/ada/held-proposals/{proposal['id']}/accept",
                              headers=bearer("ada"))
    assert accepted.status_code == 200, accepted.text
    fact = accepted.json()["fact"]
    assert (fact["text"], fact["person_id"], fact["source_session_id"]) == (
        VEGAN, ana["id"], "s2")
    assert accepted.json()["proposal"]["result_fact_id"] == fact["id"]
    (ana,) = await persons(api, "ada")
    assert [f["text"] for f in ana["facts"]] == ["The user's sister Ana is vegetarian", VEGAN]
    assert await listed(api, "ada") == [], "none of them is the user's"

    # The export and the Python client carry whom it was about.
    export = (await api.get("/users/ada/export", headers=bearer("ada"))).json()
    assert [(p["id"], p["person_id"]) for p in export["held_proposals"]] == [
        (proposal["id"], ana["id"])]
    url = str(api.base_url).rstrip("/")
    async with AsyncMemoryApi(url, token=lambda: token("ada"), timeout_s=30) as client:
        (answered,) = await client.held_proposals("ada", state="resolved")
        assert (answered.person_id, answered.result_fact_id) == (ana["id"], fact["id"])

    # An erase takes the proposal with the persons.
    erased = await api.delete("/users/ada", headers=bearer("ada"))
    assert erased.status_code == 200, erased.text
    assert erased.json()["deleted"]["memory_held_proposal"] == 1
    assert erased.json()["deleted"]["memory_person"] == 1
    assert await held(api, "ada", "all") == []


async def test_a_merge_moves_the_open_held_addition_with_the_persons_facts(
    llm: Settings, redis: Redis, api: httpx.AsyncClient, stub: StubServer
) -> None:
    await undecided_about_ana(llm, redis, stub, "cy")
    (ana,) = await persons(api, "cy")
    made = await api.post("/users/cy/persons", headers=bearer("cy"),
                          json={"display_name": "Anna", "relation": "sister"})
    assert made.status_code == 201, made.text
    anna = made.json()
    merged = await api.post(f"/users/cy/persons/{ana['id']}/merge", headers=bearer("cy"),
                            json={"into": anna["id"]})
    assert merged.status_code == 200, merged.text
    (proposal,) = await held(api, "cy")
    assert proposal["person_id"] == anna["id"], "moved in the merge's transaction"
    accepted = await api.post(f"/users/cy/held-proposals/{proposal['id']}/accept",
                              headers=bearer("cy"))
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["fact"]["person_id"] == anna["id"]
    (kept,) = await persons(api, "cy")
    assert (kept["id"], [f["text"] for f in kept["facts"]]) == (
        anna["id"], ["The user's sister Ana is vegetarian", VEGAN])


async def test_an_addition_left_on_a_person_merged_by_the_previous_release_goes_to_the_target(
    llm: Settings, redis: Redis, api: httpx.AsyncClient, stub: StubServer,
    db: asyncpg.Connection,
) -> None:
    # A rolling upgrade: an API of the previous release merged Ana into Anna without
    # moving the open held addition (it knew of none); accepting it then writes the fact
    # about the person Ana was merged into, never about a merged one.
    await undecided_about_ana(llm, redis, stub, "di")
    (ana,) = await persons(api, "di")
    made = await api.post("/users/di/persons", headers=bearer("di"),
                          json={"display_name": "Anna", "relation": "sister"})
    anna = made.json()
    await db.execute("UPDATE memory_person SET merged_into = $2, merged_at = now()"
                     " WHERE user_id = 'di' AND id = $1", ana["id"], anna["id"])
    (proposal,) = await held(api, "di")
    assert proposal["person_id"] == ana["id"], "left where the old merge found it"
    accepted = await api.post(f"/users/di/held-proposals/{proposal['id']}/accept",
                              headers=bearer("di"))
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["fact"]["person_id"] == anna["id"]
