"""A session's status and the wait for a hand-over over HTTP, against real Redis,
PostgreSQL, the API on a loopback port and a worker committing through the
OpenAI-compatible stub: the wait answers once the commit covers the hand-over, or
with covered false when its time passes; its bound is enforced; it holds no database
connection and ends when its client goes away; Redis gone is a 503 within about a
second, for the status, the wait and the events alike."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.api_server import api_settings, bearer, new_key, running_api
from tests.helpers import active_texts, drain
from tests.integration.api.conftest import ID_KEY, key_auth
from worker.client import session_tag
from worker.config import Settings
from worker.embedded import EmbeddedRedis
from worker.store.service_keys import ServiceKeyStore

TURN = {"messages": [{"role": "user", "content": "I live in Berlin."},
                     {"role": "assistant", "content": "Noted."}]}
STATUS = "/users/ada/sessions/s1/status"


def wait_path(handover_id: int, user: str = "ada") -> str:
    return f"/users/{user}/sessions/s1/handovers/{handover_id}/wait"


async def hand_over(api: httpx.AsyncClient, auth: dict[str, str]) -> int:
    answer = await api.post("/users/ada/sessions/s1/handover", json=TURN, headers=auth)
    assert answer.status_code == 202, answer.text
    handover_id: int = answer.json()["handover_id"]
    return handover_id


async def test_status_and_wait_follow_a_real_commit(
    client: httpx.AsyncClient, keys: ServiceKeyStore, llm: Settings, db: asyncpg.Connection,
) -> None:
    auth = key_auth(await new_key(keys, "handover"))
    before = await client.get(STATUS, headers=auth)
    assert before.status_code == 200, before.text
    assert before.json() == {"latest": 0, "finished": 0, "older_lists": 0,
                             "session_tag": session_tag("s1", "ada", ID_KEY)}
    assert re.fullmatch(r"[0-9a-f]{16}", before.json()["session_tag"])
    handover_id = await hand_over(client, auth)
    pending = (await client.get(STATUS, headers=auth)).json()
    assert (pending["latest"], pending["finished"]) == (handover_id, 0)

    waiting = asyncio.create_task(client.get(wait_path(handover_id),
                                             params={"timeout_s": 30}, headers=auth))
    await asyncio.sleep(0.3)
    assert not waiting.done(), "nothing committed yet"
    assert (await drain(llm))["failed"] == 0
    drained = time.monotonic()
    answer = await waiting
    assert time.monotonic() - drained < 2.0, "answered as the commit covered it"
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"covered": True, "latest": handover_id,
                             "finished": handover_id, "older_lists": 0}
    assert await active_texts(db, "ada"), "read-your-writes: the facts are there"
    # The user's own token follows their session too; a read key as well.
    for other in (bearer("ada"), key_auth(await new_key(keys, "read"))):
        mine = await client.get(STATUS, headers=other)
        assert mine.status_code == 200 and mine.json()["finished"] == handover_id
        done = await client.get(wait_path(handover_id), headers=other)
        assert done.status_code == 200 and done.json()["covered"] is True
    theirs = await client.get("/users/bob/sessions/s1/status", headers=bearer("ada"))
    assert theirs.status_code == 403
    assert theirs.json()["detail"] == "the token is not for this user"


async def test_a_wait_that_times_out_answers_covered_false(
    client: httpx.AsyncClient, keys: ServiceKeyStore,
) -> None:
    auth = key_auth(await new_key(keys, "handover"))
    handover_id = await hand_over(client, auth)  # no worker runs
    started = time.monotonic()
    answer = await client.get(wait_path(handover_id), params={"timeout_s": 0.5},
                              headers=auth)
    took = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"covered": False, "latest": handover_id, "finished": 0,
                             "older_lists": 0}
    assert 0.5 <= took < 2.0, took
    # Hand-over 0 (nothing stored) is covered at once, as in Python.
    zero = await client.get(wait_path(0), params={"timeout_s": 5}, headers=auth)
    assert zero.json()["covered"] is True


@pytest.mark.parametrize(("handover_id", "params"), [
    (1, {"timeout_s": 30.001}), (1, {"timeout_s": 31}), (1, {"timeout_s": 0}),
    (1, {"timeout_s": -1}), (1, {"timeout_s": "soon"}), (-1, {}), (2**63, {}),
])
async def test_the_wait_is_bounded(
    client: httpx.AsyncClient, keys: ServiceKeyStore, handover_id: int,
    params: dict[str, object],
) -> None:
    auth = key_auth(await new_key(keys, "handover"))
    answer = await client.get(wait_path(handover_id), params=params, headers=auth)
    assert answer.status_code == 422, answer.text


async def test_waits_hold_no_database_connection_and_end_when_their_client_goes(
    llm: Settings, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="memfleet.api.access")
    one_connection = api_settings(llm).model_copy(update={"db_pool_min": 1, "db_pool_max": 1})
    async with (running_api(one_connection) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=60) as api):
        waits = [asyncio.create_task(api.get(wait_path(7), params={"timeout_s": 30},
                                             headers=bearer("ada"))) for _ in range(4)]
        await asyncio.sleep(0.5)
        started = time.monotonic()
        facts = await api.get("/users/ada/facts", headers=bearer("ada"))
        assert facts.status_code == 200, facts.text
        assert time.monotonic() - started < 2.0, "the pool's one connection was free"
        assert not any(wait.done() for wait in waits)
        for wait in waits:
            wait.cancel()  # the client closes its connections
        await asyncio.gather(*waits, return_exceptions=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if len(_wait_lines(caplog)) == len(waits):
                break
            await asyncio.sleep(0.05)
    ended = _wait_lines(caplog)
    assert len(ended) == len(waits), caplog.text
    assert all(ms < 5000 for ms in ended), ended


def _wait_lines(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The milliseconds of the finished waits in the access log."""
    found = []
    for record in caplog.records:
        message = record.getMessage()
        if "/wait " in message:
            found.append(float(message.rsplit(" ", 2)[1]))
    return found


async def test_redis_gone_is_a_503_within_about_a_second(
    llm: Settings, keys: ServiceKeyStore, tmp_path: Path,
) -> None:
    own_redis = EmbeddedRedis(tmp_path / "redis")
    await asyncio.to_thread(own_redis.start)
    try:
        auth = key_auth(await new_key(keys, "handover"))
        app_settings = api_settings(llm).model_copy(update={"redis_url": own_redis.url})
        async with (running_api(app_settings) as base_url,
                    httpx.AsyncClient(base_url=base_url, timeout=30) as api):
            handover_id = await hand_over(api, auth)
            await asyncio.to_thread(own_redis.kill)
            for path, params in ((STATUS, {}), (wait_path(handover_id), {"timeout_s": 10}),
                                 ("/events", {}), ("/events", {"after": "0"})):
                started = time.monotonic()
                gone = await api.get(path, params=params, headers=auth)
                assert time.monotonic() - started < 2.0, path
                assert gone.status_code == 503, (path, gone.text)
                assert gone.json()["error"] == "HandoverUnavailable"
                assert gone.headers["Retry-After"] == "1"
            await asyncio.to_thread(own_redis.start)
            back = await api.get(STATUS, headers=auth)
            assert back.status_code == 200, back.text
    finally:
        await asyncio.to_thread(own_redis.stop)
