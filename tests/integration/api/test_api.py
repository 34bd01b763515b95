"""The memory API and chat stand-in over real HTTP (uvicorn), PostgreSQL and Redis."""

from __future__ import annotations

import gc
import json
import time
from typing import Any

import asyncpg
import httpx
import jwt
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from api_stub.chat_log import session_key
from api_stub.chat_routes import HANDOVER_HEADER
from tests.api_server import SECRET, api_settings, bearer, running_api, token
from tests.helpers import drain
from worker.api.app import OPENAPI_PATH, create_app, openapi_json
from worker.config import Settings
from worker.errors import ConfigurationError
from worker.fleet.gc_tuning import YOUNG_GC_THRESHOLD
from worker.protocol.keys import SessionRef
from worker.read import open_reader


async def chat(api: httpx.AsyncClient, user: str, session: str, text: str) -> httpx.Response:
    return await api.post(f"/chat/{session}", json={"content": text}, headers=bearer(user))


async def active(api: httpx.AsyncClient, user: str) -> dict[str, list[str]]:
    resp = await api.get(f"/users/{user}/facts", headers=bearer(user))
    assert resp.status_code == 200, resp.text
    body = resp.json()
    return {g["category"]: [f["text"] for f in g["facts"]] for g in body["groups"]}


async def fact_id(db: asyncpg.Connection, user: str, text: str) -> int:
    value: int = await db.fetchval(
        "SELECT id FROM memory_fact WHERE user_id = $1 AND text = $2", user, text
    )
    return value


async def add(api: httpx.AsyncClient, user: str, text: str, **extra: Any) -> dict[str, Any]:
    resp = await api.post(f"/users/{user}/facts", json={"text": text, **extra},
                          headers=bearer(user))
    assert resp.status_code == 201, resp.text
    body: dict[str, Any] = resp.json()
    return body


@pytest.mark.chat_standin  # it chats: the stand-in is mounted only when asked
async def test_chat_hands_over_and_the_worker_fills_the_memory_api(
    api: httpx.AsyncClient, settings: Settings, redis: Redis
) -> None:
    first = await chat(api, "ada", "s1", "Hi! My name is Ada and I live in Berlin.")
    assert first.status_code == 200, first.text
    assert first.json()["handover"] == "scheduled"
    assert float(first.headers[HANDOVER_HEADER]) >= 0
    # The answer came back before any memory work: nothing is stored yet.
    assert await active(api, "ada") == {}
    second = await chat(api, "ada", "s1", "For work I use Postgres.")
    assert second.json()["answer"]
    stored = [json.loads(m) for m in await redis.lrange(session_key("ada", "s1"), 0, -1)]
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]

    await drain(settings)
    assert await active(api, "ada") == {
        "fact": ["Name is Ada", "Lives in Berlin"], "preference": ["Uses Postgres"],
    }
    # The next turn's prompt carries what the worker learnt.
    third = await chat(api, "ada", "s1", "What do you know about me?")
    assert third.json()["known_facts"] == 3


@pytest.mark.chat_standin  # it chats: the stand-in is mounted only when asked
async def test_manual_add_remove_and_chain(
    api: httpx.AsyncClient, settings: Settings, db: asyncpg.Connection
) -> None:
    added = await add(api, "ada", "Allergic to peanuts", category="fact", importance=9)
    assert added["source_kind"] == "manual"
    assert added["superseded_at"] is None
    assert await db.fetchval("SELECT version FROM user_memory_state WHERE user_id = 'ada'") == 1

    await chat(api, "ada", "s1", "I live in Berlin.")
    await drain(settings)
    await chat(api, "ada", "s1", "I live in Lisbon now.")
    await drain(settings)
    assert await active(api, "ada") == {"fact": ["Allergic to peanuts", "Lives in Lisbon"]}
    berlin = await fact_id(db, "ada", "Lives in Berlin")
    lisbon = await fact_id(db, "ada", "Lives in Lisbon")
    for start in (berlin, lisbon):
        resp = await api.get(f"/users/ada/facts/{start}/chain", headers=bearer("ada"))
        assert resp.status_code == 200
        versions = resp.json()["versions"]
        assert [v["text"] for v in versions] == ["Lives in Berlin", "Lives in Lisbon"]
        assert versions[0]["superseded_by"] == lisbon

    version_before = await db.fetchval("SELECT version FROM user_memory_state WHERE user_id='ada'")
    removed = await api.delete(f"/users/ada/facts/{lisbon}", headers=bearer("ada"))
    assert removed.status_code == 200
    assert removed.json()["superseded_at"] is not None
    assert removed.json()["superseded_by"] is None
    assert await db.fetchval(
        "SELECT version FROM user_memory_state WHERE user_id='ada'") == version_before + 1
    assert await active(api, "ada") == {"fact": ["Allergic to peanuts"]}
    # Nothing was deleted: the chain still shows both versions, the last one ended.
    assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE user_id = 'ada'") == 3
    chain = (await api.get(f"/users/ada/facts/{berlin}/chain", headers=bearer("ada"))).json()
    assert [v["superseded_at"] is not None for v in chain["versions"]] == [True, True]

    again = await api.delete(f"/users/ada/facts/{lisbon}", headers=bearer("ada"))
    assert again.status_code == 409
    missing = await api.delete("/users/ada/facts/999999", headers=bearer("ada"))
    assert missing.status_code == 404
    assert (await api.get("/users/ada/facts/999999/chain", headers=bearer("ada"))).status_code \
        == 404


async def test_search_is_hybrid_over_active_facts_only(
    api: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    for text in ("Lives in Lisbon", "Uses Postgres at work", "Has a dog called Rex",
                 "Prefers tea over coffee"):
        await add(api, "ada", text)
    old = await add(api, "ada", "Lives in Lisbon old flat on Rua Augusta")
    await api.delete(f"/users/ada/facts/{old['id']}", headers=bearer("ada"))

    resp = await api.get("/users/ada/search", params={"q": "Lisbon", "k": 3},
                         headers=bearer("ada"))
    assert resp.status_code == 200
    results = resp.json()["results"]
    assert 1 <= len(results) <= 3
    assert results[0]["fact"]["text"] == "Lives in Lisbon"
    assert results[0]["lexical_rank"] == 1
    assert all(r["fact"]["superseded_at"] is None for r in results)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    # Punctuation and tsquery operators in the query are only words.
    odd = await api.get("/users/ada/search", params={"q": "!!'dog' & | -rex:*"},
                        headers=bearer("ada"))
    assert odd.status_code == 200
    assert odd.json()["results"][0]["fact"]["text"] == "Has a dog called Rex"


@pytest.mark.chat_standin  # it chats: the stand-in is mounted only when asked
async def test_erase_deletes_everything_of_one_user_only(
    api: httpx.AsyncClient, settings: Settings, db: asyncpg.Connection, redis: Redis
) -> None:
    for user in ("ada", "bob"):
        await chat(api, user, f"{user}-s1", "I live in Berlin.")
        await drain(settings)
        await chat(api, user, f"{user}-s1", "I live in Lisbon now.")
        await add(api, user, "Likes jazz")
    await drain(settings)

    async def counts(user: str) -> dict[str, int]:
        return {
            table: await db.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = $1", user)  # noqa: S608
            for table in ("memory_held_proposal", "memory_note", "memory_note_check",
                          "memory_fact", "memory_person_label", "memory_person", "memory_run",
                          "session_cursor", "user_memory_state")
        }

    before = await counts("ada")
    assert before["memory_fact"] == 3 and before["memory_run"] >= 2
    bob_before = await counts("bob")
    # An older list not yet processed.
    await redis.rpush(SessionRef("ada", "ada-s1").backlog_key, b"1:{}")
    resp = await api.delete("/users/ada", headers=bearer("ada"))
    assert resp.status_code == 200
    assert resp.json() == {"user_id": "ada", "deleted": {
        **before, "user_memory_consent": 0, "handovers": 1, "jobs": 0, "chat_sessions": 1,
        "memory_portrait": 0, "user_portrait_choice": 0}}
    erasures = await db.fetch("SELECT removed::text FROM memory_erasure")
    assert len(erasures) == 1 and "ada" not in erasures[0][0], "recorded without the user"
    assert await counts("ada") == dict.fromkeys(before, 0)
    assert await counts("bob") == bob_before
    assert await redis.exists(session_key("ada", "ada-s1")) == 0
    assert await redis.exists(session_key("bob", "bob-s1")) == 1
    ada, bob = SessionRef("ada", "ada-s1"), SessionRef("bob", "bob-s1")
    for key in (ada.handover_key, ada.meta_key, ada.backlog_key):
        assert await redis.exists(key) == 0, "the hand-over's lists are erased"
    # Bob's session is idle and processed: its list was dropped, its meta stays.
    assert await redis.exists(bob.meta_key) == 1, "another user's hand-over stays"
    again = await api.delete("/users/ada", headers=bearer("ada"))
    assert again.status_code == 200 and not any(again.json()["deleted"].values()), "harmless"
    assert await active(api, "ada") == {}


def _endpoints(user: str, fact: int) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("GET", f"/users/{user}/facts", None),
        ("POST", f"/users/{user}/facts", {"text": "Owns a boat"}),
        ("DELETE", f"/users/{user}/facts/{fact}", None),
        ("GET", f"/users/{user}/facts/{fact}/chain", None),
        ("PUT", f"/users/{user}/facts/{fact}/pin", None),
        ("DELETE", f"/users/{user}/facts/{fact}/pin", None),
        ("PATCH", f"/users/{user}/facts/{fact}", {"text": "Lives in Bonn"}),
        ("GET", f"/users/{user}/held-proposals", None),
        ("POST", f"/users/{user}/held-proposals/{fact}/accept", None),
        ("POST", f"/users/{user}/held-proposals/{fact}/dismiss", None),
        ("GET", f"/users/{user}/search?q=Berlin", None),
        ("GET", f"/users/{user}/known-facts", None),
        ("GET", f"/users/{user}/prompt-blocks?q=Berlin", None),
        ("GET", f"/users/{user}/stable-block", None),
        ("GET", f"/users/{user}/consent", None),
        ("GET", f"/users/{user}/export", None),
        ("PUT", f"/users/{user}/consent", {"enabled": False, "forget": True}),
        ("DELETE", f"/users/{user}", None),
    ]


@pytest.mark.chat_standin  # it chats: the stand-in is mounted only when asked
async def test_a_token_never_reads_or_changes_another_users_facts(
    api: httpx.AsyncClient, db: asyncpg.Connection, redis: Redis
) -> None:
    ada_fact = (await add(api, "ada", "Lives in Berlin"))["id"]
    await chat(api, "ada", "ada-s1", "I use Postgres.")
    snapshot = await db.fetch("SELECT * FROM memory_fact ORDER BY id")
    session = await redis.lrange(session_key("ada", "ada-s1"), 0, -1)

    expired = token("ada", ttl_s=-60)
    forged = token("ada", secret="another-secret-of-sufficient-length!!")  # noqa: S106
    unsigned = jwt.encode({"sub": "ada", "exp": int(time.time()) + 600}, None, algorithm="none")
    no_exp = jwt.encode({"sub": "ada"}, SECRET, algorithm="HS256")
    bad_headers: list[dict[str, str]] = [
        {}, {"Authorization": "Basic YWRhOnB3"}, {"Authorization": "Bearer"},
        {"Authorization": "Bearer not-a-jwt"},
        *({"Authorization": f"Bearer {t}"} for t in (expired, forged, unsigned, no_exp)),
    ]
    for method, path, body in _endpoints("ada", ada_fact):
        # Bob's valid token on Ada's paths: 403, whatever the fact id.
        for fid in (ada_fact, 999_999):
            p = path.replace(str(ada_fact), str(fid))
            resp = await api.request(method, p, json=body, headers=bearer("bob"))
            assert resp.status_code == 403, (method, p, resp.text)
            assert resp.json() == {"detail": "the token is not for this user"}
        for headers in bad_headers:
            resp = await api.request(method, path, json=body, headers=headers)
            assert resp.status_code == 401, (method, path, headers, resp.text)
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        # Bob's token on his own paths with Ada's fact id: exactly a missing id.
        if f"/facts/{ada_fact}" in path:
            mine = await api.request(method, path.replace("/ada/", "/bob/"), json=body,
                                     headers=bearer("bob"))
            none = await api.request(method, path.replace("/ada/", "/bob/").replace(
                str(ada_fact), "999999"), json=body, headers=bearer("bob"))
            assert mine.status_code == none.status_code == 404
            assert mine.json() == none.json()
    # Bob naming Ada's session id talks in a session of his own: hers is untouched,
    # and nothing tells him whether she uses that id.
    resp = await chat(api, "bob", "ada-s1", "I live in Oslo.")
    assert resp.status_code == 200
    assert len(await redis.lrange(session_key("bob", "ada-s1"), 0, -1)) == 2
    chat_unauth = await api.post("/chat/ada-s1", json={"content": "hi"})
    assert chat_unauth.status_code == 401

    assert await db.fetch("SELECT * FROM memory_fact ORDER BY id") == snapshot
    assert await redis.lrange(session_key("ada", "ada-s1"), 0, -1) == session
    assert await active(api, "ada") == {"general": ["Lives in Berlin"]}


async def test_read_path_library_block(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    await add(api, "ada", "Lives in Lisbon", category="fact")
    await add(api, "ada", "Prefers\nshort answers", category="preference")
    for i in range(6):
        await add(api, "ada", f"Visited museum number {i}", category="event")
    async with open_reader(settings) as reader:  # as README's "Read memory back" shows
        block = await reader.known_facts_block("ada")
        lines = block.splitlines()
        assert len(lines) == 1 + 8
        assert lines[1].startswith("- [fact] Lives in Lisbon (")
        assert lines[2].startswith("- [preference] Prefers short answers (")  # one line each
        few = await reader.known_facts_block("ada", query="where do I live Lisbon", top_k=2)
        assert len(few.splitlines()) == 3
        assert "Lives in Lisbon" in few
        assert await reader.known_facts_block("nobody") == ""
    over_http = await api.get("/users/ada/known-facts", headers=bearer("ada"))
    assert over_http.json()["block"] == block


async def test_the_api_docs_are_off_by_default_and_never_load_from_a_cdn(
    api: httpx.AsyncClient, settings: Settings
) -> None:
    for path in ("/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"):
        assert (await api.get(path)).status_code == 404, path
    assert OPENAPI_PATH.read_text("utf-8") == openapi_json(), (
        "docs/openapi.json is stale: memfleet api --write-openapi docs/openapi.json"
    )
    enabled = api_settings(settings).model_copy(update={"api_docs": True})
    async with running_api(enabled) as base_url, \
            httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        served = (await client.get("/openapi.json")).json()
        assert served == create_app(enabled).openapi() == json.loads(openapi_json())
        for path in ("/docs", "/redoc"):  # FastAPI's pages fetch their scripts from a CDN
            assert (await client.get(path)).status_code == 404, path


def test_the_app_refuses_to_start_without_a_secret(settings: Settings) -> None:
    with pytest.raises(ConfigurationError, match="MEMFLEET_JWT_SECRET"):
        create_app(api_settings(settings, jwt_secret=None))
    with pytest.raises(ConfigurationError, match="at least 32 bytes"):
        create_app(api_settings(settings, jwt_secret=SecretStr("short")))


@pytest.mark.parametrize("tune_gc", [True, False])
async def test_a_server_process_quiets_its_garbage_collector_once_started(
    settings: Settings, tune_gc: bool
) -> None:
    """worker.api.serve's processes (tune_gc) freeze what start-up built, so a full
    collection does not pause hand-overs; an app sharing a process (tests) does not."""
    threshold = gc.get_threshold()
    gc.unfreeze()
    app = create_app(api_settings(settings), tune_gc=tune_gc)
    try:
        async with app.router.lifespan_context(app):
            frozen = gc.get_freeze_count()
            young = gc.get_threshold()[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)

    if tune_gc:
        assert frozen > 0 and young == YOUNG_GC_THRESHOLD
    else:
        assert frozen == 0 and young == threshold[0]
