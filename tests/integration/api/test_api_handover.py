"""The hand-over over HTTP, against real Redis, PostgreSQL and the API on a loopback port:
a service key with the handover scope hands a session over and gets its id, and a
worker's drain commits its facts; the Python hand-over's refusals are 400, 413 and
503 (within about a second with Redis gone); an end user's token and a key without
the scope are 403; no message text reaches the log."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.api_server import api_settings, bearer, new_key, running_api
from tests.helpers import active_texts, drain
from tests.integration.api.conftest import key_auth
from worker.api.settings import ApiSettings
from worker.config import Settings
from worker.embedded import EmbeddedRedis
from worker.protocol.queue import BACKLOG_LIMIT
from worker.store.service_keys import ServiceKeyStore

# The API's limit on a request body (MEMFLEET_API_MAX_BODY_BYTES), as the tests serve it.
API_MAX_BODY_BYTES = ApiSettings.model_fields["api_max_body_bytes"].default

BERLIN_TURN = "I live in Berlin."  # the stub's extraction: "Lives in Berlin"


async def scoped_auth(keys: ServiceKeyStore, *scopes: str) -> dict[str, str]:
    return key_auth(await new_key(keys, *scopes))


def turn(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text},
                         {"role": "assistant", "content": "Noted."}]}


async def test_a_handover_over_http_is_committed_by_a_worker(
    api: httpx.AsyncClient, keys: ServiceKeyStore, settings: Settings,
    db: asyncpg.Connection, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    handover = await scoped_auth(keys, "handover")
    first = await api.post("/users/ada/sessions/s1/handover", json=turn(BERLIN_TURN),
                           headers=handover)
    assert first.status_code == 202, first.text
    assert first.json()["handover_id"] >= 1
    again = await api.post("/users/ada/sessions/s1/handover",
                           json=turn(BERLIN_TURN) | {"agent_id": "luna"}, headers=handover)
    assert again.status_code == 202, again.text
    assert again.json()["handover_id"] > first.json()["handover_id"]
    assert (await drain(settings))["failed"] == 0
    assert await active_texts(db, "ada") == ["Lives in Berlin"]
    assert await active_texts(db, "bob") == []
    assert "Berlin" not in caplog.text


async def test_the_python_handovers_refusals_are_400_and_413(
    api: httpx.AsyncClient, keys: ServiceKeyStore, settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    handover = await scoped_auth(keys, "handover")
    path = "/users/ada/sessions/s1/handover"
    bad_role = await api.post(path, json={"messages": [{"role": "wizard",
                                                        "content": "Secret spell"}]},
                              headers=handover)
    assert bad_role.status_code == 400, bad_role.text
    assert bad_role.json()["detail"].startswith("message 0: role")
    assert bad_role.json()["error"] == "InvalidHandover"
    empty = await api.post(path, json={"messages": [{"role": "user", "content": "  "}]},
                           headers=handover)
    assert empty.status_code == 400 and empty.json()["detail"] == "message 0: content is empty"
    not_json = await api.post(path, content=b"{not json", headers=handover
                              | {"Content-Type": "application/json"})
    # Not JSON, or not of the body's shape: 422 as on every route (worker.api.errors).
    assert not_json.status_code == 422, not_json.text
    # One message over MEMFLEET_MAX_MESSAGE_BYTES (4 UTF-8 bytes a character: within
    # MEMFLEET_MAX_MESSAGE_CHARS), the body within the API's limit.
    over = "\N{GRINNING FACE}" * (settings.max_message_bytes // 4 + 1)
    assert len(over) <= settings.max_message_chars
    too_large = await api.post(path, json=turn(over), headers=handover)
    assert too_large.status_code == 413, too_large.text
    assert str(settings.max_message_bytes) in too_large.json()["detail"]
    assert too_large.json()["error"] == "HandoverTooLarge"
    # A body over MEMFLEET_API_MAX_BODY_BYTES: refused at the door.
    huge = await api.post(path, json=turn("y" * (API_MAX_BODY_BYTES + 1)),
                          headers=handover)
    assert huge.status_code == 413 and huge.json()["error"] == "HandoverTooLarge"
    assert "Secret spell" not in caplog.text and "\N{GRINNING FACE}" not in caplog.text


async def test_a_user_token_or_a_key_without_the_scope_is_403(
    api: httpx.AsyncClient, keys: ServiceKeyStore, settings: Settings,
    db: asyncpg.Connection,
) -> None:
    path = "/users/ada/sessions/s1/handover"
    own = await api.post(path, json=turn(BERLIN_TURN), headers=bearer("ada"))
    assert own.status_code == 403, own.text
    assert "end user's token cannot hand over" in own.json()["detail"]
    for scopes in (("read",), ("admin",), ("read", "admin")):
        wrong = await api.post(path, json=turn(BERLIN_TURN),
                               headers=await scoped_auth(keys, *scopes))
        assert wrong.status_code == 403, scopes
        assert wrong.json()["detail"] == "the service key lacks the handover scope"
    assert (await api.post(path, json=turn(BERLIN_TURN))).status_code == 401
    await drain(settings)
    assert await active_texts(db, "ada") == [], "nothing refused was handed over"


async def test_redis_gone_is_503_within_about_a_second(
    settings: Settings, keys: ServiceKeyStore, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    own_redis = EmbeddedRedis(tmp_path / "redis")
    await asyncio.to_thread(own_redis.start)
    try:
        handover = await scoped_auth(keys, "handover")
        app_settings = api_settings(settings).model_copy(update={"redis_url": own_redis.url})
        async with (running_api(app_settings) as base_url,
                    httpx.AsyncClient(base_url=base_url, timeout=30) as api):
            path = "/users/ada/sessions/s1/handover"
            ok = await api.post(path, json=turn(BERLIN_TURN), headers=handover)
            assert ok.status_code == 202, ok.text
            await asyncio.to_thread(own_redis.kill)  # SIGKILL: gone mid-connection
            started = time.monotonic()
            gone = await api.post(path, json=turn(BERLIN_TURN), headers=handover)
            assert gone.status_code == 503, gone.text
            assert time.monotonic() - started < 2.0
            assert gone.headers["Retry-After"] == "1"
            assert gone.json() == {"detail": "Redis is unavailable; retry later",
                                   "error": "HandoverUnavailable"}
            # Restarted, the next hand-over is taken again.
            await asyncio.to_thread(own_redis.start)
            back = await api.post(path, json=turn(BERLIN_TURN), headers=handover)
            assert back.status_code == 202, back.text
    finally:
        await asyncio.to_thread(own_redis.stop)
    assert "Berlin" not in caplog.text


async def test_a_full_user_budget_is_429_with_retry_after_and_frees_after_a_drain(
    settings: Settings, keys: ServiceKeyStore,
) -> None:
    handover = await scoped_auth(keys, "handover")
    one_session = api_settings(settings).model_copy(update={"max_user_sessions": 1})
    async with (running_api(one_session) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=30) as api):
        first = await api.post("/users/ada/sessions/s1/handover", json=turn(BERLIN_TURN),
                               headers=handover)
        assert first.status_code == 202, first.text
        full = await api.post("/users/ada/sessions/s2/handover", json=turn(BERLIN_TURN),
                              headers=handover)
        assert full.status_code == 429, full.text
        assert int(full.headers["Retry-After"]) > 0
        assert full.json()["error"] == "UserSessionsFull"
        await drain(settings)
        freed = await api.post("/users/ada/sessions/s2/handover", json=turn(BERLIN_TURN),
                               headers=handover)
        assert freed.status_code == 202, freed.text


async def test_a_redis_that_never_answers_is_503_within_about_a_second(
    settings: Settings, keys: ServiceKeyStore,
) -> None:
    # A socket that takes connections (the kernel's backlog) and never answers: the
    # hand-over's own bound, not a refused connection, ends the wait.
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        handover = await scoped_auth(keys, "handover")
        hung = api_settings(settings).model_copy(
            update={"redis_url": f"redis://127.0.0.1:{silent.getsockname()[1]}/0"})
        async with (running_api(hung) as base_url,
                    httpx.AsyncClient(base_url=base_url, timeout=30) as api):
            started = time.monotonic()
            gone = await api.post("/users/ada/sessions/s1/handover", json=turn(BERLIN_TURN),
                                  headers=handover)
            took = time.monotonic() - started
            assert gone.status_code == 503, gone.text
            assert 0.9 < took < 2.0, took
    finally:
        silent.close()


async def test_a_full_session_names_its_kind_in_the_429(
    settings: Settings, keys: ServiceKeyStore,
) -> None:
    # No worker runs: each list that replaces the last one waits behind it, until the
    # session's bytes (a small budget) or its count of older lists is full.
    handover = await scoped_auth(keys, "handover")
    small = api_settings(settings).model_copy(update={"max_session_bytes": 4096})
    kinds: list[str] = []
    for app_settings in (small, api_settings(settings)):
        async with (running_api(app_settings) as base_url,
                    httpx.AsyncClient(base_url=base_url, timeout=30) as api):
            for n in range(BACKLOG_LIMIT + 2):
                answer = await api.post(f"/users/ada/sessions/{len(kinds)}/handover",
                                        json=turn(f"List {n}: " + "x" * 600),
                                        headers=handover)
                if answer.status_code != 202:
                    assert answer.status_code == 429, answer.text
                    assert int(answer.headers["Retry-After"]) > 0
                    kinds.append(answer.json()["error"])
                    break
    assert kinds == ["SessionBytesFull", "HandoverBacklogFull"]
