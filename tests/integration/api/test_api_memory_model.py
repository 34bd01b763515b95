"""The memory model over the memory API (real HTTP, PostgreSQL): scopes and agents,
"as of" reads, expiry, pinning, held proposals and their export."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.api_server import bearer
from tests.contract.test_store_contract import advance, commit, insert, vec
from tests.contract.test_store_reads import paris_then_lisbon
from tests.helpers import fences_for_tests
from tests.integration.api.test_api import add
from worker.config import Settings
from worker.memory_rules import confidence_for
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import ExistingRow, HoldProposal


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[PostgresStore]:
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
    try:
        yield PostgresStore(pool, fences_for_tests())
    finally:
        await pool.close()


async def listed(api: httpx.AsyncClient, user: str, **params: str) -> list[str]:
    resp = await api.get(f"/users/{user}/facts", params=params, headers=bearer(user))
    assert resp.status_code == 200, resp.text
    return [f["text"] for g in resp.json()["groups"] for f in g["facts"]]


async def refused(api: httpx.AsyncClient, method: str, path: str, **kw: Any) -> str:
    resp = await api.request(method, path, headers=bearer("ada"), **kw)
    assert resp.status_code == 422, resp.text
    return str(resp.json())


async def test_two_agents_share_the_profile_and_keep_their_relationships(
    api: httpx.AsyncClient,
) -> None:
    shared = await add(api, "ada", "Lives in Lisbon", category="fact")
    sam = await add(api, "ada", "Calls the assistant Sam", category="relationship",
                    scope="relationship", agent_id="sam")
    await add(api, "ada", "Plays chess with Max", category="relationship",
              scope="relationship", agent_id="max")
    assert (sam["scope"], sam["agent_id"], shared["scope"], shared["agent_id"]) == (
        "relationship", "sam", "profile", None)
    assert sam["source_kind"] == "manual" and sam["basis"] == "stated"
    assert sam["confidence"] == confidence_for("manual", "stated")

    assert await listed(api, "ada", agent_id="sam") == ["Lives in Lisbon",
                                                        "Calls the assistant Sam"]
    assert await listed(api, "ada", agent_id="max") == ["Lives in Lisbon", "Plays chess with Max"]
    assert await listed(api, "ada", scope="both") == ["Lives in Lisbon"], "no agent: profile"
    assert sorted(await listed(api, "ada")) == [
        "Calls the assistant Sam", "Lives in Lisbon", "Plays chess with Max"], "all, by default"
    assert await listed(api, "ada", scope="relationship", agent_id="max") == [
        "Plays chess with Max"]
    assert await listed(api, "ada", scope="relationship") == []
    assert await listed(api, "ada", scope="none", agent_id="sam") == []
    search = await api.get("/users/ada/search", params={"q": "chess Max Sam", "agent_id": "sam"},
                           headers=bearer("ada"))
    assert search.status_code == 200
    assert "Plays chess with Max" not in str(search.json())
    assert "Calls the assistant Sam" in str(search.json())
    known = await api.get("/users/ada/known-facts", params={"agent_id": "max"},
                          headers=bearer("ada"))
    assert known.json()["count"] == 2 and "Sam" not in known.json()["block"]
    profile_only = await api.get("/users/ada/known-facts", params={"scope": "profile",
                                                                   "agent_id": "max"},
                                 headers=bearer("ada"))
    assert profile_only.json()["count"] == 1
    assert await listed(api, "bob", agent_id="sam") == [], "another user sees nothing"


async def test_a_manual_fact_is_checked_as_a_whole(api: httpx.AsyncClient) -> None:
    path = "/users/ada/facts"
    assert "needs agent_id" in await refused(
        api, "POST", path, json={"text": "x", "scope": "relationship"})
    assert "takes no agent_id" in await refused(
        api, "POST", path, json={"text": "x", "agent_id": "sam"})
    assert "valid_to is before valid_from" in await refused(api, "POST", path, json={
        "text": "x", "valid_from": "2026-10-01T00:00:00Z", "valid_to": "2026-09-01T00:00:00Z"})
    assert "valid_to is before valid_from" in await refused(api, "POST", path, json={
        "text": "x", "valid_to": "2020-01-01T00:00:00Z"}), "no valid_from: from now"
    assert "out of range" in await refused(api, "POST", path, json={
        "text": "x", "expires_at": "9999-12-31T23:00:00-05:00"})
    await refused(api, "POST", path, json={"text": "x", "agent_id": "bad\nid",
                                           "scope": "relationship"})
    await refused(api, "GET", path, params={"valid_at": "yesterday"})
    assert "cannot be combined" in await refused(api, "GET", path, params={
        "valid_at": "2026-01-01", "known_at": "2026-01-01"})
    await refused(api, "GET", "/users/ada/search", params={"q": "x", "scope": "everything"})
    assert await listed(api, "ada") == [], "nothing was written"

    fact = await add(api, "ada", "Lived in Porto", valid_from="2020-01-01T00:00:00",
                     valid_to="2024-06-01T00:00:00+02:00", pinned=True)
    assert fact["valid_from"] == "2020-01-01T00:00:00Z"
    assert datetime.fromisoformat(fact["valid_to"]) == datetime(2024, 5, 31, 22, tzinfo=UTC)
    assert fact["pinned"] is True and fact["expires_at"] is None
    assert await listed(api, "ada", valid_at="2023-01-01") == ["Lived in Porto"]
    assert await listed(api, "ada", valid_at="2024-06-02") == []


async def test_as_of_reads_over_the_api(api: httpx.AsyncClient, store: PostgresStore) -> None:
    await paris_then_lisbon(store)  # user u1
    u1 = "u1"
    assert await listed(api, u1) == ["Lives in Lisbon"]
    assert await listed(api, u1, valid_at="2026-09-15") == ["Lives in Paris"]
    assert await listed(api, u1, valid_at="2026-10-15T00:00:00Z") == ["Lives in Lisbon"]
    assert await listed(api, u1, known_at="2026-11-01") == ["Lives in Paris"]
    assert await listed(api, u1, known_at="2026-11-24T12:00:00+01:00") == ["Lives in Lisbon"]
    resp = await api.get(f"/users/{u1}/search", params={"q": "Lives", "valid_at": "2026-09-15"},
                         headers=bearer(u1))
    assert [h["fact"]["text"] for h in resp.json()["results"]] == ["Lives in Paris"]
    chain = (await api.get(f"/users/{u1}/facts/1/chain", headers=bearer(u1))).json()
    paris, lisbon = chain["versions"]
    assert (paris["valid_from"], paris["valid_to"]) == ("2024-01-01T00:00:00Z",
                                                        "2026-10-01T00:00:00Z")
    assert paris["superseded_reason"] == "updated" and paris["superseded_by"] == lisbon["id"]
    assert (lisbon["observed_at"], lisbon["valid_to"]) == ("2026-11-24T10:00:00Z", None)


async def test_an_expired_fact_is_no_longer_listed(api: httpx.AsyncClient) -> None:
    now = datetime.now(UTC)
    gone = (now - timedelta(minutes=1)).isoformat()
    await add(api, "ada", "Is in Rome this week", expires_at=gone,
              valid_from=(now - timedelta(days=3)).isoformat())
    await add(api, "ada", "Is at a conference", expires_at=(now + timedelta(hours=1)).isoformat())
    assert await listed(api, "ada") == ["Is at a conference"]
    assert await listed(api, "ada", valid_at=(now - timedelta(minutes=2)).isoformat()) == [
        "Is in Rome this week"]
    known = await api.get("/users/ada/known-facts", headers=bearer("ada"))
    assert known.json()["count"] == 1


async def test_pin_and_unpin_a_fact(api: httpx.AsyncClient) -> None:
    important = await add(api, "ada", "Name is Ada", category="fact", importance=9)
    small = await add(api, "ada", "Has a bike", category="fact", importance=2)
    assert await listed(api, "ada") == ["Name is Ada", "Has a bike"]
    pinned = await api.put(f"/users/ada/facts/{small['id']}/pin", headers=bearer("ada"))
    assert pinned.status_code == 200 and pinned.json()["pinned"] is True
    assert await listed(api, "ada") == ["Has a bike", "Name is Ada"], "pinned first"
    again = await api.put(f"/users/ada/facts/{small['id']}/pin", headers=bearer("ada"))
    assert again.status_code == 200 and again.json()["pinned"] is True
    unpinned = await api.delete(f"/users/ada/facts/{small['id']}/pin", headers=bearer("ada"))
    assert unpinned.status_code == 200 and unpinned.json()["pinned"] is False
    assert await listed(api, "ada") == ["Name is Ada", "Has a bike"]
    # Another user's id is exactly a missing one.
    for method in ("PUT", "DELETE"):
        theirs = await api.request(method, f"/users/bob/facts/{important['id']}/pin",
                                   headers=bearer("bob"))
        missing = await api.request(method, "/users/bob/facts/999999/pin",
                                    headers=bearer("bob"))
        assert theirs.status_code == missing.status_code == 404
        assert theirs.json() == missing.json()
        forbidden = await api.request(method, f"/users/ada/facts/{important['id']}/pin",
                                      headers=bearer("bob"))
        assert forbidden.status_code == 403
    await api.delete(f"/users/ada/facts/{small['id']}", headers=bearer("ada"))
    gone = await api.put(f"/users/ada/facts/{small['id']}/pin", headers=bearer("ada"))
    assert gone.status_code == 409


async def test_held_proposals_are_listed_and_exported(
    api: httpx.AsyncClient, store: PostgresStore
) -> None:
    await store.commit_run(commit(advance(0), (insert(0, "Likes jazz", vec(0)),)))
    (jazz,) = await store.facts("u1")
    assert await store.set_pinned("u1", jazz.id, True) is not None
    hold = HoldProposal(ExistingRow(jazz.id), "UPDATE", "pinned", "Likes blues")
    await store.commit_run(commit(advance(1, position=1), (hold,), 2))
    resp = await api.get("/users/u1/held-proposals", headers=bearer("u1"))
    assert resp.status_code == 200
    (held,) = resp.json()["proposals"]
    assert (held["fact_id"], held["event"], held["reason"], held["text"]) == (
        jazz.id, "UPDATE", "pinned", "Likes blues")
    assert (await api.get("/users/bob/held-proposals", headers=bearer("bob"))).json() == {
        "proposals": []}
    assert (await api.get("/users/u1/held-proposals", headers=bearer("bob"))).status_code == 403
    export = (await api.get("/users/u1/export", headers=bearer("u1"))).json()
    assert [h["text"] for h in export["held_proposals"]] == ["Likes blues"]
    assert export["held_proposals"][0]["fact_id"] == jazz.id
    (fact,) = export["facts"]
    assert fact["pinned"] is True and fact["scope"] == "profile"
    other = (await api.get("/users/bob/export", headers=bearer("bob"))).json()
    assert other["held_proposals"] == []


async def test_a_manual_fact_records_how_it_was_written(
    api: httpx.AsyncClient, store: PostgresStore
) -> None:
    """api by default, panel or tool when the writer says so; an edit records its own;
    an extracted fact has none; the chain and the export carry it."""
    plain = await add(api, "u1", "Likes tea")
    panel = await add(api, "u1", "Lives in Oslo", via="panel")
    tool = await add(api, "u1", "Runs marathons", via="tool")
    assert [f["written_via"] for f in (plain, panel, tool)] == ["api", "panel", "tool"]
    assert plain["source_kind"] == panel["source_kind"] == tool["source_kind"] == "manual"
    assert plain["confidence"] == panel["confidence"] == tool["confidence"], "trusted alike"
    mine = "/users/ada/facts"  # refused() is ada's
    assert "via" in await refused(api, "POST", mine, json={"text": "x", "via": "worker"})
    assert "via" in await refused(api, "POST", mine, json={"text": "x", "via": "cli"})
    assert "via" in await refused(api, "PATCH", f"{mine}/1", json={"text": "x", "via": "nope"})
    path = "/users/u1/facts"
    resp = await api.patch(f"{path}/{panel['id']}", json={"text": "Lives in Bergen",
                                                          "via": "panel"}, headers=bearer("u1"))
    assert resp.status_code == 200, resp.text
    edited = resp.json()
    assert edited["written_via"] == "panel"
    resp = await api.patch(f"{path}/{tool['id']}", json={"text": "Runs ultramarathons"},
                           headers=bearer("u1"))
    assert resp.status_code == 200 and resp.json()["written_via"] == "api", "the default"
    chain = (await api.get(f"{path}/{panel['id']}/chain", headers=bearer("u1"))).json()
    assert [v["written_via"] for v in chain["versions"]] == ["panel", "panel"]

    await store.commit_run(commit(advance(0), (insert(0, "Plays chess", vec(5)),),
                                  (await store.neighbors("u1", vec(0)[None, :], 1)).version))
    listed = (await api.get(path, headers=bearer("u1"))).json()
    by_text = {f["text"]: f for g in listed["groups"] for f in g["facts"]}
    assert by_text["Plays chess"]["source_kind"] == "extracted"
    assert by_text["Plays chess"]["written_via"] is None

    export = (await api.get("/users/u1/export", headers=bearer("u1"))).json()
    assert {f["text"]: f["written_via"] for f in export["facts"]} == {
        "Likes tea": "api", "Lives in Oslo": "panel", "Lives in Bergen": "panel",
        "Runs marathons": "tool", "Runs ultramarathons": "api", "Plays chess": None}
