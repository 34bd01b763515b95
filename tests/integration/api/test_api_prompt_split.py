"""The prompt split over HTTP (docs/prompt.md), on real PostgreSQL and the API served
over real HTTP, embeddings on the OpenAI-compatible stub: for a user with more facts
than the stable block and the volatile top-k hold, the stable block's bytes and version
stay the same over 20 turns of 20 different messages and change after one commit that
touches what it holds (and only then); /stable-block answers 304 to its ETag until
then and 200 with a new ETag after; another user's blocks are refused; memory off,
both blocks are empty."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from api_stub.llm_stub import StubServer
from tests.api_server import api_settings, bearer, new_key, running_api
from tests.integration.api.conftest import key_auth
from tests.integration.api.test_api_prompt_read import embeddings_calls, remember, timing
from tests.openai_stub import openai_settings
from worker.config import Settings
from worker.read_split import VOLATILE_HEADER, stable_version
from worker.store.service_keys import ServiceKeyStore

STABLE_FACTS = 4
VOLATILE_K = 3
TOPICS = ["cello", "Lisbon", "bees", "nurse", "peanuts", "sailing", "chess", "Kotlin",
          "marathon", "sourdough", "Portuguese", "violin", "garden", "cats", "jazz",
          "hiking", "pottery", "tango", "astronomy", "kayak"]
FACTS = [f"Talks often about {topic}" for topic in TOPICS]  # 20 facts > 4 + 3
QUERIES = [f"what do you remember about {topic}?" for topic in TOPICS]


@pytest.fixture
async def split_api(settings: Settings, stub: StubServer) -> AsyncIterator[httpx.AsyncClient]:
    """The API with small split budgets: 4 stable facts, a volatile top-k of 3."""
    served = api_settings(openai_settings(settings, stub, read_stable_max_facts=STABLE_FACTS,
                                          read_volatile_top_k=VOLATILE_K))
    async with running_api(served) as base_url, \
            httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        yield client


def texts(block: str) -> list[str]:
    return [line.split("] ", 1)[1].rsplit(" (", 1)[0] for line in block.splitlines()[1:]]


async def test_the_stable_block_holds_over_20_turns_and_changes_after_a_commit(
    split_api: httpx.AsyncClient, settings: Settings, stub: StubServer, keys: ServiceKeyStore,
) -> None:
    await remember(settings, "ada", FACTS)
    read = key_auth(await new_key(keys, "read"))
    stub.reset()
    stables, volatiles, etags = set(), set(), set()
    for query in QUERIES:
        resp = await split_api.get("/users/ada/prompt-blocks", params={"q": query},
                                   headers=read)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        stables.add((body["stable"]["block"], body["stable"]["version"]))
        etags.add(resp.headers["ETag"])
        volatiles.add(body["volatile"]["block"])
        assert body["stable"]["count"] == STABLE_FACTS
        assert body["volatile"]["count"] == VOLATILE_K
        assert body["volatile"]["block"].startswith(VOLATILE_HEADER)
        assert not set(texts(body["stable"]["block"])) & set(texts(body["volatile"]["block"]))
        assert set(timing(resp)) == {"embed", "store", "total"}
    assert embeddings_calls(stub) == len(QUERIES)
    assert len(stables) == 1, "20 turns, no commit: one stable block"
    (block, version), = stables
    assert version == stable_version(block) and etags == {f'"{version}"'}
    assert len(volatiles) > 10, "the volatile block follows the message"
    assert texts(block) == FACTS[:STABLE_FACTS], "importance ties: the oldest ids"

    # A commit outside what the block holds (a less important fact) leaves it as it is.
    added = await split_api.post("/users/ada/facts", headers=bearer("ada"),
                                 json={"text": "Once visited Oslo", "importance": 1})
    assert added.status_code == 201, added.text
    same = await split_api.get("/users/ada/stable-block", headers=read)
    assert (same.json()["block"], same.json()["version"]) == (block, version)

    # An important fact enters it: a new version, in the body and the ETag.
    added = await split_api.post("/users/ada/facts", headers=bearer("ada"),
                                 json={"text": "Is called Ada", "importance": 9})
    assert added.status_code == 201, added.text
    after = (await split_api.get("/users/ada/prompt-blocks", params={"q": QUERIES[0]},
                                 headers=read))
    assert after.json()["stable"]["version"] != version
    assert after.headers["ETag"] == f'"{after.json()["stable"]["version"]}"'
    assert texts(after.json()["stable"]["block"])[0] == "Is called Ada"

    # A supersession (the user removes a fact the block holds) changes it again.
    removed = await split_api.delete(f"/users/ada/facts/{added.json()['id']}",
                                     headers=bearer("ada"))
    assert removed.status_code == 200, removed.text
    back = await split_api.get("/users/ada/stable-block", headers=read)
    assert (back.json()["block"], back.json()["version"]) == (block, version)


async def test_a_conditional_request_answers_304_until_a_change(
    split_api: httpx.AsyncClient, settings: Settings, keys: ServiceKeyStore,
) -> None:
    await remember(settings, "bob", FACTS[:8])
    read = key_auth(await new_key(keys, "read"))
    first = await split_api.get("/users/bob/stable-block", headers=read)
    assert first.status_code == 200, first.text
    tag = first.headers["ETag"]
    assert tag == f'"{first.json()["version"]}"' and first.json()["count"] == STABLE_FACTS
    for _ in range(3):
        again = await split_api.get("/users/bob/stable-block",
                                    headers={**read, "If-None-Match": tag})
        assert again.status_code == 304 and again.content == b""
        assert again.headers["ETag"] == tag
    stale = await split_api.get("/users/bob/stable-block",
                                headers={**read, "If-None-Match": '"not-the-version"'})
    assert stale.status_code == 200 and stale.headers["ETag"] == tag

    pinned = await split_api.put(f"/users/bob/facts/{await _last_id(split_api, read)}/pin",
                                 headers=bearer("bob"))
    assert pinned.status_code == 200, pinned.text
    changed = await split_api.get("/users/bob/stable-block",
                                  headers={**read, "If-None-Match": tag})
    assert changed.status_code == 200
    assert changed.headers["ETag"] != tag
    assert changed.headers["ETag"] == f'"{changed.json()["version"]}"'
    assert texts(changed.json()["block"])[0] == FACTS[7], "pinned first"
    now = await split_api.get("/users/bob/stable-block",
                              headers={**read, "If-None-Match": changed.headers["ETag"]})
    assert now.status_code == 304


async def _last_id(api: httpx.AsyncClient, read: dict[str, str]) -> int:
    listed = (await api.get("/users/bob/facts", headers=read)).json()
    return max(f["id"] for group in listed["groups"] for f in group["facts"])


async def test_another_users_blocks_are_refused(
    split_api: httpx.AsyncClient, settings: Settings, keys: ServiceKeyStore,
) -> None:
    await remember(settings, "cy", FACTS[:5])
    for path in ("/users/cy/prompt-blocks", "/users/cy/stable-block"):
        assert (await split_api.get(path, headers=bearer("cy"))).status_code == 200
        refused = await split_api.get(path, params={"q": "cello"}
                                      if path.endswith("blocks") else {},
                                      headers=bearer("eve"))
        assert refused.status_code == 403, refused.text
        assert "Talks" not in refused.text
        unscoped = key_auth(await new_key(keys, "handover"))
        assert (await split_api.get(path, headers=unscoped)).status_code == 403
        assert (await split_api.get(path)).status_code == 401


async def test_memory_off_both_blocks_are_empty(
    split_api: httpx.AsyncClient, settings: Settings, stub: StubServer, keys: ServiceKeyStore,
) -> None:
    await remember(settings, "dee", FACTS)
    read = key_auth(await new_key(keys, "read"))
    on = await split_api.get("/users/dee/prompt-blocks", params={"q": QUERIES[3]},
                             headers=read)
    assert on.json()["stable"]["count"] == STABLE_FACTS and on.json()["volatile"]["count"]
    off = await split_api.put("/users/dee/consent", json={"enabled": False},
                              headers=bearer("dee"))
    assert off.status_code == 200, off.text
    stub.reset()
    resp = await split_api.get("/users/dee/prompt-blocks", params={"q": QUERIES[3]},
                               headers=read)
    assert resp.status_code == 200
    assert resp.json() == {"stable": {"block": "", "version": stable_version(""), "count": 0},
                           "volatile": {"block": "", "count": 0}}
    assert embeddings_calls(stub) == 0, "memory off: the message goes to no model"
    alone = await split_api.get("/users/dee/stable-block", headers=read)
    assert alone.json()["block"] == "" and alone.json()["count"] == 0
