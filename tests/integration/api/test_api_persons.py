"""The people in a user's life over the memory API (docs/persons.md), end to end:
conversations handed over to a real worker (the real `openai` client on the LLM stub)
make the persons; the user lists them with their facts, renames one, adds an alias,
moves a fact to another person and back to themselves, and merges two; the read path
gives the people their own section; the export carries them; another user reaches
none of it; an erase removes them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.api_server import bearer, token
from tests.helpers import say
from tests.integration.api.test_api_memory_model import listed
from tests.openai_stub import openai_settings
from worker.client import AsyncMemoryApi, MemoryApi
from worker.config import Settings
from worker.errors import MemoryApiError


@pytest.fixture
def api_fleet(llm: Settings) -> Settings:
    """The API on the workers' settings (the LLM stub's)."""
    return llm


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    return openai_settings(settings, stub, llm_timeout_s=2.0, persons=True)  # off by default


async def persons(api: httpx.AsyncClient, user: str, **params: Any) -> list[dict[str, Any]]:
    resp = await api.get(f"/users/{user}/persons", params=params, headers=bearer(user))
    assert resp.status_code == 200, resp.text
    listed_persons: list[dict[str, Any]] = resp.json()["persons"]
    return listed_persons


def named(found: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(p for p in found if name in (p["display_name"], p["relation"]))


async def test_the_user_sees_corrects_and_merges_their_persons(
    llm: Settings, redis: Redis, api: httpx.AsyncClient
) -> None:
    await say(llm, redis, "ada", "s1", "My sister Ana is vegetarian. I live in Munich.",
              "My boss Tom moved to Berlin.")
    found = await persons(api, "ada")
    assert [(p["display_name"], p["relation"], [f["text"] for f in p["facts"]])
            for p in found] == [
        ("Ana", "sister", ["The user's sister Ana is vegetarian"]),
        ("Tom", "boss", ["The user's boss Tom moved to Berlin"])]
    assert await listed(api, "ada") == ["Lives in Munich"], "never the user's facts"
    ana, tom = named(found, "Ana"), named(found, "Tom")

    # Renamed, with an alias: new label versions.
    renamed = await api.patch(f"/users/ada/persons/{ana['id']}", headers=bearer("ada"),
                              json={"display_name": "Anna"})
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json()["display_name"], renamed.json()["relation"],
            renamed.json()["label_set_by"]) == ("Anna", "sister", "user")
    aliased = await api.post(f"/users/ada/persons/{ana['id']}/aliases", headers=bearer("ada"),
                             json={"alias": "Annie"})
    assert aliased.json()["aliases"] == ["Annie"]
    blank = await api.patch(f"/users/ada/persons/{ana['id']}", headers=bearer("ada"),
                            json={"display_name": None, "relation": None})
    assert blank.status_code == 422

    # A fact moved to another person, then back to the user: versions in its chain.
    fact = named(await persons(api, "ada"), "Tom")["facts"][0]
    moved = await api.put(f"/users/ada/facts/{fact['id']}/person", headers=bearer("ada"),
                          json={"person_id": ana["id"]})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["person_id"], moved.json()["text"]) == (ana["id"], fact["text"])
    chain = (await api.get(f"/users/ada/facts/{fact['id']}/chain",
                           headers=bearer("ada"))).json()["versions"]
    assert [(v["person_id"], v["superseded_reason"]) for v in chain] == [
        (tom["id"], "updated"), (ana["id"], None)]
    back = await api.put(f"/users/ada/facts/{moved.json()['id']}/person",
                         headers=bearer("ada"), json={"person_id": None})
    assert back.status_code == 200 and back.json()["person_id"] is None
    assert await listed(api, "ada") == ["Lives in Munich", fact["text"]]

    # Two persons merged: the facts follow, the names become aliases, nothing deleted.
    await say(llm, redis, "ada", "s2", "My brother Leo plays chess.")
    leo = named(await persons(api, "ada"), "Leo")
    merged = await api.post(f"/users/ada/persons/{leo['id']}/merge", headers=bearer("ada"),
                            json={"into": ana["id"]})
    assert merged.status_code == 200, merged.text
    assert merged.json()["aliases"] == ["Annie", "Leo"]
    after = await persons(api, "ada")
    assert [p["display_name"] for p in after] == ["Anna", "Tom"]
    assert [f["text"] for f in named(after, "Anna")["facts"]] == [
        "The user's sister Ana is vegetarian", "The user's brother Leo plays chess"]
    everyone = await persons(api, "ada", include_merged="true")
    assert named(everyone, "Leo")["merged_into"] == ana["id"]
    again = await api.post(f"/users/ada/persons/{leo['id']}/merge", headers=bearer("ada"),
                           json={"into": ana["id"]})
    assert again.status_code == 409
    # An id past bigint is bad input (422), never a store error, and changes nothing.
    too_big = 2**63
    beyond = await api.post(f"/users/ada/persons/{tom['id']}/merge", headers=bearer("ada"),
                            json={"into": too_big})
    moved_beyond = await api.put(f"/users/ada/facts/{back.json()['id']}/person",
                                 headers=bearer("ada"), json={"person_id": too_big})
    assert (beyond.status_code, moved_beyond.status_code) == (422, 422)
    assert await persons(api, "ada", include_merged="true") == everyone

    # The read path: the people in their own section, never as the user's.
    known = (await api.get("/users/ada/known-facts", headers=bearer("ada"))).json()
    user_part, _, people_part = known["block"].partition("\n\nAbout the people")
    assert "Anna" not in user_part and "chess" not in user_part
    assert "- Anna (sister):" in people_part and "plays chess" in people_part
    stable = await api.get("/users/ada/stable-block", headers=bearer("ada"))
    assert stable.status_code == 200, stable.text
    assert "About the people in the user's life" in stable.json()["block"]
    # With a question the read's plan counts the facts about persons first (a user with
    # none skips the section's statement): the section is there all the same.
    asked = (await api.get("/users/ada/known-facts", params={"q": "chess"},
                           headers=bearer("ada"))).json()
    assert "- Anna (sister):" in asked["block"].partition("\n\nAbout the people")[2]
    blocks = (await api.get("/users/ada/prompt-blocks", params={"q": "chess"},
                            headers=bearer("ada"))).json()
    assert blocks["stable"]["block"] == stable.json()["block"]

    # The export carries the persons with their label history.
    export = (await api.get("/users/ada/export", headers=bearer("ada"))).json()
    labels = next(p for p in export["persons"] if p["id"] == ana["id"])["labels"]
    assert [label["display_name"] for label in labels] == ["Ana", "Anna", "Anna", "Anna"]
    assert any(f["person_id"] == ana["id"] for f in export["facts"])


async def test_a_rename_said_in_conversation_renames_the_person_and_keeps_their_facts(
    llm: Settings, redis: Redis, api: httpx.AsyncClient
) -> None:
    await say(llm, redis, "eve", "s1", "My sister Ana is vegetarian.")
    await say(llm, redis, "eve", "s2", "Ana goes by Annie now.")
    await say(llm, redis, "eve", "s3", "Annie moved to Lyon.")
    (annie,) = await persons(api, "eve", include_merged="true")
    assert (annie["display_name"], annie["relation"], annie["aliases"],
            annie["label_set_by"]) == ("Annie", "sister", ["Ana"], "conversation")
    # The rename itself is no fact: the label's versions keep it.
    assert [f["text"] for f in annie["facts"]] == [
        "The user's sister Ana is vegetarian", "Annie moved to Lyon"]
    assert await listed(api, "eve") == [], "never the user's facts"
    # The old name is a label version of its own, kept in the export.
    export = (await api.get("/users/eve/export", headers=bearer("eve"))).json()
    (kept,) = export["persons"]
    assert [(label["display_name"], label["aliases"]) for label in kept["labels"]] == [
        ("Ana", []), ("Annie", ["Ana"])]


async def test_another_user_reaches_none_of_a_users_persons_and_an_erase_removes_them(
    llm: Settings, redis: Redis, api: httpx.AsyncClient
) -> None:
    await say(llm, redis, "ada", "s1", "My sister Ana is vegetarian.")
    (ana,) = await persons(api, "ada")
    fact = ana["facts"][0]
    assert await persons(api, "bob") == []
    bob = bearer("bob")
    for method, path, body in (
            ("PATCH", f"/users/bob/persons/{ana['id']}", {"display_name": "X"}),
            ("POST", f"/users/bob/persons/{ana['id']}/aliases", {"alias": "X"}),
            ("PUT", f"/users/bob/facts/{fact['id']}/person", {"person_id": None})):
        resp = await api.request(method, path, json=body, headers=bob)
        assert resp.status_code == 404, (path, resp.text)
    own = await api.post("/users/bob/persons", headers=bob, json={"relation": "friend"})
    assert own.status_code == 201, own.text
    merge = await api.post(f"/users/bob/persons/{own.json()['id']}/merge", headers=bob,
                           json={"into": ana["id"]})
    assert merge.status_code == 404, "ada's person is no one of bob's"
    # Bob's token on ada's routes: refused before any store call.
    assert (await api.get("/users/ada/persons", headers=bob)).status_code == 403

    erased = await api.delete("/users/ada", headers=bearer("ada"))
    assert erased.status_code == 200, erased.text
    assert erased.json()["deleted"]["memory_person"] == 1
    assert await persons(api, "ada", include_merged="true") == []
    assert [p["relation"] for p in await persons(api, "bob")] == ["friend"]


async def test_the_python_clients_speak_the_persons_routes(
    llm: Settings, redis: Redis, api: httpx.AsyncClient
) -> None:
    await say(llm, redis, "cat", "s1", "My sister Ana is vegetarian.")
    url = str(api.base_url).rstrip("/")
    async with AsyncMemoryApi(url, token=lambda: token("cat"), timeout_s=30) as client:
        (ana,) = await client.persons("cat")
        assert (ana.display_name, ana.relation, [f.text for f in ana.facts]) == (
            "Ana", "sister", ["The user's sister Ana is vegetarian"])
        leo = await client.create_person("cat", display_name="Leo", relation="brother")
        assert (leo.created_from, leo.label_set_by) == ("user", "user")
        assert (await client.add_alias("cat", leo.id, "Leon")).aliases == ["Leon"]
        assert (await client.update_person("cat", leo.id, relation=None)).relation is None
        moved = await client.move_fact("cat", ana.facts[0].id, leo.id)
        assert moved.person_id == leo.id
        kept = await client.merge_persons("cat", ana.id, into=leo.id)
        assert (kept.id, kept.aliases) == (leo.id, ["Leon", "Ana"])
    with MemoryApi(url, token=lambda: token("cat"), timeout_s=30) as blocking:
        assert [p.display_name for p in blocking.persons("cat", include_merged=True)] == [
            "Ana", "Leo"]
        with pytest.raises(MemoryApiError):
            blocking.merge_persons("cat", leo.id, into=leo.id)
