"""The user's corrections over real HTTP and PostgreSQL: PATCH a fact, list, accept and
dismiss held proposals (worker.api.panel_routes). Each change is checked through the
chain route and the facts list; a stale view is a 409 and never a lost edit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api_server import api_settings, bearer, new_key, running_api
from tests.contract.test_store_contract import advance, commit, insert, vec
from tests.helpers import fences_for_tests
from tests.integration.api.conftest import key_auth
from tests.integration.api.test_api import add
from tests.integration.api.test_api_memory_model import listed
from worker.config import Settings
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.service_keys import ServiceKeyStore
from worker.store.types import ExistingRow, HoldProposal, InsertFact, SupersedeFact


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[PostgresStore]:
    """The API's database as a worker writes it (commits, held proposals)."""
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
    try:
        yield PostgresStore(pool, fences_for_tests())
    finally:
        await pool.close()


async def chain(api: httpx.AsyncClient, user: str, fact: int) -> list[dict[str, Any]]:
    resp = await api.get(f"/users/{user}/facts/{fact}/chain", headers=bearer(user))
    assert resp.status_code == 200, resp.text
    versions: list[dict[str, Any]] = resp.json()["versions"]
    return versions


async def proposals(api: httpx.AsyncClient, user: str, **params: str) -> list[dict[str, Any]]:
    resp = await api.get(f"/users/{user}/held-proposals", params=params, headers=bearer(user))
    assert resp.status_code == 200, resp.text
    found: list[dict[str, Any]] = resp.json()["proposals"]
    return found


async def patch(api: httpx.AsyncClient, user: str, fact: int, **body: Any) -> httpx.Response:
    return await api.patch(f"/users/{user}/facts/{fact}", json=body, headers=bearer(user))


async def answer(api: httpx.AsyncClient, user: str, proposal: int, verb: str,
                 headers: dict[str, str] | None = None) -> httpx.Response:
    return await api.post(f"/users/{user}/held-proposals/{proposal}/{verb}",
                          headers=headers or bearer(user))


async def worker_fact(store: PostgresStore, text: str, user: str = "u1") -> int:
    """A fact a worker's run committed (the first run of session s1)."""
    await store.commit_run(commit(advance(0, user=user), (insert(0, text, vec(0)),)))
    (fact,) = await store.facts(user)
    return fact.id


async def hold(store: PostgresStore, fact: int, event: str = "UPDATE",
               text: str | None = "Likes blues", user: str = "u1") -> None:
    """A later run of s1 proposes a change of ``fact`` and holds it (it is pinned)."""
    version = (await store.neighbors(user, vec(0)[None, :], 1)).version
    cursor = (await store.load_session(user, "s1")).cursor
    assert cursor is not None
    move = advance(cursor.version, user=user, position=cursor.position + 1)
    await store.commit_run(commit(move, (HoldProposal(ExistingRow(fact), event, "pinned",
                                                      text),), version))


async def test_an_edit_supersedes_the_fact_in_its_chain(api: httpx.AsyncClient) -> None:
    old = await add(api, "ada", "Calls the assistant Sam", category="relationship",
                    scope="relationship", agent_id="sam", pinned=True, importance=7)
    resp = await patch(api, "ada", old["id"], text="Calls the assistant Samwise")
    assert resp.status_code == 200, resp.text
    new = resp.json()
    assert new["id"] != old["id"] and new["text"] == "Calls the assistant Samwise"
    assert (new["source_kind"], new["basis"], new["confidence"]) == ("manual", "stated", 1.0)
    assert (new["scope"], new["agent_id"], new["pinned"], new["category"],
            new["importance"]) == ("relationship", "sam", True, "relationship", 7)
    assert await listed(api, "ada") == ["Calls the assistant Samwise"]
    versions = await chain(api, "ada", old["id"])
    assert versions == await chain(api, "ada", new["id"])
    assert [(v["id"], v["superseded_by"], v["superseded_reason"]) for v in versions] == [
        (old["id"], new["id"], "updated"), (new["id"], None, None)]
    # A correction: the new text holds from the old one's start, the old text never did.
    assert new["valid_from"] == old["valid_from"] == versions[0]["valid_to"]

    moved = await patch(api, "ada", new["id"], text="Calls the assistant Frodo",
                        category="preference", valid_from="2030-01-01T00:00:00Z")
    assert moved.status_code == 200, moved.text
    assert (moved.json()["category"], moved.json()["valid_from"]) == (
        "preference", "2030-01-01T00:00:00Z")
    versions = await chain(api, "ada", old["id"])
    assert [v["text"] for v in versions] == ["Calls the assistant Sam",
                                             "Calls the assistant Samwise",
                                             "Calls the assistant Frodo"]
    assert versions[1]["valid_to"] == "2030-01-01T00:00:00Z", "a change at a time of its own"


async def test_an_edit_is_checked_as_an_add_is(api: httpx.AsyncClient) -> None:
    fact = await add(api, "ada", "Lived in Porto", valid_from="2020-01-01T00:00:00Z",
                     valid_to="2024-01-01T00:00:00Z", expires_at="2040-01-01T00:00:00Z")
    path = f"/users/ada/facts/{fact['id']}"
    for body in ({}, {"text": ""}, {"text": "   "}, {"text": "x" * 2_001},
                 {"text": "a\x00b"}, {"text": "a\x1bb"}, {"text": 5},
                 {"text": "ok", "scope": "profile"}, {"text": "ok", "pinned": False},
                 {"text": "ok", "category": None}, {"text": "ok", "category": "gossip"},
                 {"text": "ok", "importance": 11}, {"text": "ok", "valid_from": None},
                 {"text": "ok", "valid_to": "2019-01-01T00:00:00Z"},
                 {"text": "ok", "valid_from": "2025-01-01T00:00:00Z"}):
        resp = await api.patch(path, json=body, headers=bearer("ada"))
        assert resp.status_code == 422, (body, resp.text)
    for raw in (b'{"text": "a\\ud800b"}', b"\xff{"):  # a lone surrogate; not UTF-8
        garbled = await api.patch(path, content=raw, headers={
            **bearer("ada"), "Content-Type": "application/json"})
        assert garbled.status_code in (400, 422), garbled.text
    assert await listed(api, "ada", valid_at="2021-01-01") == ["Lived in Porto"]
    assert len(await chain(api, "ada", fact["id"])) == 1, "nothing was written"
    # Left out: the old version's; null: cleared.
    kept = await patch(api, "ada", fact["id"], text="Lived in Braga", expires_at=None)
    assert kept.status_code == 200, kept.text
    assert (kept.json()["valid_from"], kept.json()["valid_to"], kept.json()["expires_at"]) == (
        "2020-01-01T00:00:00Z", "2024-01-01T00:00:00Z", None)


async def test_edits_and_answers_are_the_users_own(
    api: httpx.AsyncClient, store: PostgresStore, keys: ServiceKeyStore
) -> None:
    jazz = await worker_fact(store, "Likes jazz")
    await store.set_pinned("u1", jazz, True)
    await hold(store, jazz)
    (proposal,) = await proposals(api, "u1")
    writes = [("PATCH", f"/users/u1/facts/{jazz}", {"text": "Likes bebop"}),
              ("POST", f"/users/u1/held-proposals/{proposal['id']}/accept", None),
              ("POST", f"/users/u1/held-proposals/{proposal['id']}/dismiss", None)]
    read_key = key_auth(await new_key(keys, "read"))
    for method, path, body in writes:
        theirs = await api.request(method, path, json=body, headers=bearer("bob"))
        assert theirs.status_code == 403, theirs.text
        assert theirs.json()["detail"] == "the token is not for this user"
        reader = await api.request(method, path, json=body, headers=read_key)
        assert reader.status_code == 403, reader.text
        assert reader.json()["detail"] == "the service key lacks the admin scope"
        # Bob on his own path with u1's ids: exactly a missing id.
        mine = await api.request(method, path.replace("/u1/", "/bob/"), json=body,
                                 headers=bearer("bob"))
        none = await api.request(method, path.replace("/u1/", "/bob/").replace(
            str(jazz), "999999").replace(f"/{proposal['id']}/", "/999999/"), json=body,
            headers=bearer("bob"))
        assert mine.status_code == none.status_code == 404, (mine.text, none.text)
        assert mine.json() == none.json()
    assert await proposals(api, "bob", state="all") == []
    assert (await api.get("/users/u1/held-proposals", headers=bearer("bob"))).status_code == 403
    assert await listed(api, "u1") == ["Likes jazz"]
    assert await proposals(api, "u1") == [proposal], "nothing was answered"
    # A chat server's admin key answers for the user; the answer says who.
    admin = key_auth(await new_key(keys, "admin"))
    dismissed = await answer(api, "u1", proposal["id"], "dismiss", admin)
    assert dismissed.status_code == 200, dismissed.text
    key_id = admin["Authorization"].split("_")[1]
    assert dismissed.json()["proposal"]["resolved_by"] == f"key:{key_id}"
    assert dismissed.json()["fact"] is None


async def test_a_stale_view_is_a_conflict_never_a_lost_edit(
    api: httpx.AsyncClient, store: PostgresStore
) -> None:
    # Two tabs of the panel edit the same version at once: one wins, one is told.
    fact = await add(api, "ada", "Uses Vim")
    tabs = await asyncio.gather(*(patch(api, "ada", fact["id"], text=text)
                                  for text in ("Uses Neovim", "Uses Emacs")))
    assert sorted(r.status_code for r in tabs) == [200, 409], [r.text for r in tabs]
    (won,) = [r.json() for r in tabs if r.status_code == 200]
    (lost,) = [r.json() for r in tabs if r.status_code == 409]
    assert lost == {"detail": "the fact is no longer active"}
    assert [v["text"] for v in await chain(api, "ada", fact["id"])] == ["Uses Vim", won["text"]]
    assert await listed(api, "ada") == [won["text"]]
    # The panel still shows the first version; a second edit of it is refused.
    again = await patch(api, "ada", fact["id"], text="Uses Helix")
    assert again.status_code == 409
    removed = await api.delete(f"/users/ada/facts/{won['id']}", headers=bearer("ada"))
    assert removed.status_code == 200
    assert (await patch(api, "ada", won["id"], text="Uses Helix")).status_code == 409
    assert len(await chain(api, "ada", fact["id"])) == 2

    # A worker's commit lands between the panel's read and the user's edit.
    paris = await worker_fact(store, "Lives in Paris")
    shown = await listed(api, "u1")
    moved = InsertFact(ref=0, text="Lives in Lisbon", category="fact", importance=5,
                       embedding=vec(1), supersedes=ExistingRow(paris))
    await store.commit_run(commit(advance(1, position=1), (moved,), 1))
    stale = await patch(api, "u1", paris, text="Lives in Lyon")
    assert (shown, stale.status_code) == (["Lives in Paris"], 409)
    assert await listed(api, "u1") == ["Lives in Lisbon"], "the worker's version stands"
    assert [v["text"] for v in await chain(api, "u1", paris)] == ["Lives in Paris",
                                                                 "Lives in Lisbon"]


async def test_an_accepted_update_and_a_dismissed_delete(
    api: httpx.AsyncClient, store: PostgresStore
) -> None:
    jazz = await worker_fact(store, "Likes jazz")
    assert (await api.put(f"/users/u1/facts/{jazz}/pin", headers=bearer("u1"))).status_code \
        == 200
    await hold(store, jazz)
    (proposal,) = await proposals(api, "u1")
    assert (proposal["event"], proposal["text"], proposal["stale"], proposal["resolution"]) \
        == ("UPDATE", "Likes blues", False, None)
    accepted = await answer(api, "u1", proposal["id"], "accept")
    assert accepted.status_code == 200, accepted.text
    blues = accepted.json()["fact"]
    answered = accepted.json()["proposal"]
    assert (blues["text"], blues["source_kind"], blues["source_session_id"],
            blues["pinned"]) == ("Likes blues", "extracted", "s1", True)
    assert (answered["resolution"], answered["resolved_by"], answered["result_fact_id"]) == (
        "accepted", "user", blues["id"])
    assert [(v["text"], v["superseded_reason"]) for v in await chain(api, "u1", jazz)] == [
        ("Likes jazz", "updated"), ("Likes blues", None)]
    assert await listed(api, "u1") == ["Likes blues"]
    assert await proposals(api, "u1") == [], "open ones by default"
    assert await proposals(api, "u1", state="resolved") == [answered]
    for verb in ("accept", "dismiss"):
        twice = await answer(api, "u1", proposal["id"], verb)
        assert twice.status_code == 409, twice.text
        assert twice.json() == {"detail": "the proposal was already answered"}
    assert len(await chain(api, "u1", jazz)) == 2

    await hold(store, blues["id"], "DELETE", None)
    (delete,) = await proposals(api, "u1")
    assert (delete["fact_id"], delete["event"], delete["text"]) == (blues["id"], "DELETE", None)
    dismissed = await answer(api, "u1", delete["id"], "dismiss")
    assert dismissed.status_code == 200, dismissed.text
    assert dismissed.json()["proposal"]["resolution"] == "dismissed"
    assert await listed(api, "u1") == ["Likes blues"], "a dismissal changes no fact"
    assert (await answer(api, "u1", delete["id"], "accept")).status_code == 409
    assert [p["resolution"] for p in await proposals(api, "u1", state="all")] == [
        "accepted", "dismissed"]
    export = (await api.get("/users/u1/export", headers=bearer("u1"))).json()
    assert [(h["resolution"], h["resolved_by"]) for h in export["held_proposals"]] == [
        ("accepted", "user"), ("dismissed", "user")]


async def test_answers_racing_each_other_end_with_one(
    api: httpx.AsyncClient, store: PostgresStore
) -> None:
    jazz = await worker_fact(store, "Likes jazz")
    await store.set_pinned("u1", jazz, True)
    for verbs in (("accept", "accept"), ("accept", "dismiss"), ("dismiss", "accept")):
        current = (await store.facts("u1"))[0].id
        await hold(store, current, "UPDATE", f"Likes {'-'.join(verbs)}")
        (proposal,) = await proposals(api, "u1")
        answers = await asyncio.gather(*(answer(api, "u1", proposal["id"], verb)
                                         for verb in verbs))
        assert sorted(r.status_code for r in answers) == [200, 409], [r.text for r in answers]
        (won,) = [verb for verb, r in zip(verbs, answers, strict=True) if r.status_code == 200]
        (final,) = [p for p in await proposals(api, "u1", state="all")
                    if p["id"] == proposal["id"]]
        assert final["resolution"] == {"accept": "accepted", "dismiss": "dismissed"}[won]
        versions = [v["text"] for v in await chain(api, "u1", jazz)]
        assert versions.count(proposal["text"]) == (1 if won == "accept" else 0), versions
    assert len(await store.facts("u1")) == 1


async def test_accept_after_the_fact_changed_is_a_conflict(
    api: httpx.AsyncClient, store: PostgresStore
) -> None:
    jazz = await worker_fact(store, "Likes jazz")
    await store.set_pinned("u1", jazz, True)
    await hold(store, jazz, "DELETE", None)
    # The user edits the fact; the proposal was about the version before.
    edited = await patch(api, "u1", jazz, text="Likes bebop")
    assert edited.status_code == 200
    (proposal,) = await proposals(api, "u1")
    assert proposal["stale"] is True
    refused = await answer(api, "u1", proposal["id"], "accept")
    assert refused.status_code == 409
    assert refused.json() == {"detail": "the fact changed since the proposal was held; the "
                                        "proposal can only be dismissed"}
    assert await listed(api, "u1") == ["Likes bebop"]
    assert len(await chain(api, "u1", jazz)) == 2
    # A worker's commit makes another proposal stale the same way.
    await hold(store, edited.json()["id"], "UPDATE", "Likes swing")
    await store.set_pinned("u1", edited.json()["id"], False)
    version = (await store.neighbors("u1", vec(0)[None, :], 1)).version
    cursor = (await store.load_session("u1", "s1")).cursor
    assert cursor is not None
    await store.commit_run(commit(advance(cursor.version, position=cursor.position + 1),
                                  (SupersedeFact(ExistingRow(edited.json()["id"])),), version))
    stale = await proposals(api, "u1")
    assert [p["stale"] for p in stale] == [True, True]
    assert (await answer(api, "u1", stale[1]["id"], "accept")).status_code == 409
    assert await listed(api, "u1") == []
    for p in stale:
        assert (await answer(api, "u1", p["id"], "dismiss")).status_code == 200
    assert await proposals(api, "u1") == []


async def test_each_correction_takes_one_of_the_users_writes(settings: Settings) -> None:
    limited = api_settings(settings).model_copy(update={
        "api_fact_writes_per_minute": 1, "api_fact_write_burst": 3})
    async with running_api(limited) as url, httpx.AsyncClient(base_url=url, timeout=30) as api:
        fact = await add(api, "ada", "Likes tea")
        assert (await patch(api, "ada", fact["id"], text="Likes green tea")).status_code == 200
        assert (await answer(api, "ada", 999_999, "dismiss")).status_code == 404
        over = await patch(api, "ada", fact["id"], text="Likes mint tea")
        assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
        assert (await answer(api, "ada", 999_999, "accept")).status_code == 429
        assert await listed(api, "ada") == ["Likes green tea"]
