"""The commit events when Redis crashes under an open stream: the stream ends (the
client learns at once instead of waiting on a dead connection), and a client that
reconnects with its last event's id, once Redis is back from its append-only file,
gets the next commit's event and not the one it had. Redis of the test's own, SIGKILLed."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx

from tests.api_server import api_settings, new_key, running_api
from tests.integration.api.conftest import SseReader, key_auth
from tests.integration.api.test_api_events import commit
from worker.config import Settings
from worker.embedded import EmbeddedRedis
from worker.store.service_keys import ServiceKeyStore


def _order(stream_id: str) -> tuple[int, int]:
    millis, _, seq = stream_id.partition("-")
    return int(millis), int(seq)



async def test_a_redis_crash_ends_the_stream_and_a_resume_misses_nothing(
    llm: Settings, keys: ServiceKeyStore, aof_redis: EmbeddedRedis,
) -> None:
    settings = llm.model_copy(update={"redis_url": aof_redis.url})
    handover = key_auth(await new_key(keys, "handover"))
    reader = key_auth(await new_key(keys, "read"))
    async with (running_api(api_settings(settings)) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=30) as api):
        async with api.stream("GET", "/events", headers=reader) as stream:
            assert stream.status_code == 200
            events = SseReader(stream)
            await commit(api, settings, handover, "s1", "I live in Berlin.")
            (first,) = await events.events(1)
            await asyncio.to_thread(aof_redis.kill)  # SIGKILL: no time to save anything
            started = time.monotonic()
            # The server ends the answer (cleanly or not); a stream that stayed open
            # would time out here.
            with contextlib.suppress(httpx.RemoteProtocolError, httpx.ReadError):
                await events.rest(timeout_s=10)
            assert time.monotonic() - started < 10
        await asyncio.to_thread(aof_redis.start)
        assert aof_redis.url == settings.redis_url
        # The first event survived in the append-only file; a resume after it gets
        # the next commit's event only.
        async with api.stream("GET", "/events",
                              headers=reader | {"Last-Event-ID": first["id"]}) as resumed:
            assert resumed.status_code == 200
            second_id = await commit(api, settings, handover, "s2", "I use Rust.")
            (second,) = await SseReader(resumed).events(1)
        assert _order(second["id"]) > _order(first["id"])
        assert second["data"]["handover"] == second_id
        async with api.stream("GET", "/events", params={"after": "0"}, headers=reader) as all_:
            assert [e["id"] for e in await SseReader(all_).events(2)] == [first["id"],
                                                                        second["id"]]
