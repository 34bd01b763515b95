"""The commit events over HTTP (server-sent events), against real Redis, PostgreSQL,
the API and a worker committing through the OpenAI-compatible stub: a stream gets
the event of a real commit, exactly as documented; a client that reconnects with
Last-Event-ID (or ?after=) neither misses nor repeats one; a process opens a
bounded number of streams; a quiet stream says keep-alive, and a server shutting
down ends its streams cleanly instead of hanging on them. Who may read them:
test_api_security.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx
from redis.asyncio import Redis

from tests.api_server import api_process, api_settings, new_key, running_api
from tests.helpers import drain
from tests.integration.api.conftest import ID_KEY, SseReader, key_auth
from worker.client import session_tag
from worker.config import Settings
from worker.protocol.keys import events_key
from worker.store.service_keys import ServiceKeyStore

EVENT_FIELDS = ["session", "handover", "older_lists", "outcome", "added", "updated",
                "deleted", "at"]


def turn(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text},
                         {"role": "assistant", "content": "Noted."}]}


async def commit(api: httpx.AsyncClient, llm: Settings, auth: dict[str, str], session: str,
                 text: str) -> int:
    """Hand a turn over and let a worker commit it; the hand-over's id."""
    answer = await api.post(f"/users/ada/sessions/{session}/handover", json=turn(text),
                            headers=auth)
    assert answer.status_code == 202, answer.text
    assert (await drain(llm))["failed"] == 0
    handover_id: int = answer.json()["handover_id"]
    return handover_id


async def test_a_stream_gets_a_real_commits_event_exactly_as_documented(
    client: httpx.AsyncClient, keys: ServiceKeyStore, llm: Settings, redis: Redis,
) -> None:
    handover = key_auth(await new_key(keys, "handover"))
    await commit(client, llm, handover, "s0", "I use Rust.")  # before: not sent
    async with client.stream("GET", "/events", headers=key_auth(
            await new_key(keys, "read"))) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.headers["cache-control"] == "no-store"
        handover_id = await commit(client, llm, handover, "s1", "I live in Berlin.")
        (event,) = await SseReader(stream).events(1)
    assert event["event"] == "commit"
    assert list(event["data"]) == EVENT_FIELDS
    data = event["data"]
    assert data["session"] == session_tag("s1", "ada", ID_KEY)
    assert (data["handover"], data["older_lists"], data["outcome"]) == (
        handover_id, 0, "committed")
    assert data["added"] >= 1 and data["updated"] == data["deleted"] == 0
    (entry_id, fields), = (await redis.xrevrange(events_key(llm.queue_name), count=1))
    assert event["id"] == entry_id.decode()
    assert data["at"] == int(fields[b"at"])
    status = await client.get("/users/ada/sessions/s1/status", headers=handover)
    assert status.json()["session_tag"] == data["session"]


async def test_a_reconnecting_client_neither_misses_nor_repeats_an_event(
    client: httpx.AsyncClient, keys: ServiceKeyStore, llm: Settings, redis: Redis,
) -> None:
    handover = key_auth(await new_key(keys, "handover"))
    reader = key_auth(await new_key(keys, "read"))
    async with client.stream("GET", "/events", headers=reader) as stream:
        await commit(client, llm, handover, "s1", "I live in Berlin.")
        (first,) = await SseReader(stream).events(1)
    # Committed while no stream was open.
    for session, text in (("s2", "I use Rust."), ("s3", "I like hiking.")):
        await commit(client, llm, handover, session, text)
    kept = [entry_id.decode() for entry_id, _ in
            await redis.xrange(events_key(llm.queue_name))]
    assert len(kept) == 3 and kept[0] == first["id"]
    async with client.stream("GET", "/events", headers=reader | {
            "Last-Event-ID": first["id"]}) as resumed:
        events = SseReader(resumed)
        missed = await events.events(2)
        assert [e["id"] for e in missed] == kept[1:]
        await commit(client, llm, handover, "s4", "I drink tea.")
        (live,) = await events.events(1)
    assert live["id"] not in kept and live["data"]["session"] == session_tag("s4", "ada", ID_KEY)
    # ?after=0: from the oldest kept; Last-Event-ID wins over ?after=.
    async with client.stream("GET", "/events", params={"after": "0"},
                             headers=reader) as replay:
        assert [e["id"] for e in await SseReader(replay).events(4)] == [*kept, live["id"]]
    async with client.stream("GET", "/events", params={"after": "0"},
                             headers=reader | {"Last-Event-ID": kept[2]}) as header_wins:
        assert [e["id"] for e in await SseReader(header_wins).events(1)] == [live["id"]]


async def test_a_stream_starts_after_a_stream_id_and_nothing_else(
    client: httpx.AsyncClient, keys: ServiceKeyStore,
) -> None:
    # Who may read the events: tests/integration/api/test_api_security.py.
    reader = key_auth(await new_key(keys, "read"))
    for bad in ("$", "later", "1-2-3", "1" * 30):
        by_query = await client.get("/events", params={"after": bad}, headers=reader)
        by_header = await client.get("/events", headers=reader | {"Last-Event-ID": bad})
        for refused in (by_query, by_header):
            assert refused.status_code == 422, bad
            assert len(bad) < 3 or bad not in refused.text, "the input is not echoed"
    for scope in ("handover", "read"):
        async with client.stream("GET", "/events", params={"after": "0-1"},
                                 headers=key_auth(await new_key(keys, scope))) as ok:
            assert ok.status_code == 200, scope


async def test_a_process_opens_a_bounded_number_of_streams(
    llm: Settings, keys: ServiceKeyStore,
) -> None:
    reader = key_auth(await new_key(keys, "read"))
    one = api_settings(llm).model_copy(update={"api_event_streams_max": 1})
    async with (running_api(one) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=30) as api):
        async with api.stream("GET", "/events", headers=reader) as first:
            assert first.status_code == 200
            second = await api.get("/events", headers=reader)
            assert second.status_code == 503, second.text
            assert int(second.headers["Retry-After"]) > 0
        # The client went away: its slot is free again (within a moment).
        deadline = time.monotonic() + 5
        while True:
            async with api.stream("GET", "/events", headers=reader) as again:
                if again.status_code == 200:
                    break
            assert time.monotonic() < deadline, "the slot was never given back"
            await asyncio.sleep(0.1)


async def test_a_quiet_stream_keeps_alive_and_a_shutdown_ends_it_cleanly(
    llm: Settings, keys: ServiceKeyStore, tmp_path: Path,
) -> None:
    # The deployed server (memfleet api): uvicorn waits for every open
    # answer before it exits, and an event stream never ends by itself.
    reader = key_auth(await new_key(keys, "read"))
    log = tmp_path / "api.log"
    async with contextlib.AsyncExitStack() as outer:
        client = await outer.enter_async_context(httpx.AsyncClient(timeout=60))
        server = contextlib.AsyncExitStack()
        base = await server.enter_async_context(api_process(llm, log))
        stream = await outer.enter_async_context(
            client.stream("GET", f"{base}/events", headers=reader))
        assert stream.status_code == 200
        events = SseReader(stream)
        started = time.monotonic()
        assert await events.comment(timeout_s=25) == ": keep-alive"
        assert 14.0 < time.monotonic() - started < 20.0
        stopping = time.monotonic()
        await server.aclose()  # SIGTERM, then the process's exit (SIGKILL after 20 s)
        assert time.monotonic() - stopping < 5.0, log.read_text("utf-8", "replace")
        rest = await events.rest(timeout_s=5)  # an incomplete chunked answer raises
        assert [line for line in rest if line] == [], "nothing more: the stream ended"
