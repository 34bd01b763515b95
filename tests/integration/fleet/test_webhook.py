"""`memfleet webhook` delivers every commit event to a receiver, at least once: through
a receiver that is down for a while, and through a sender SIGKILLed mid-delivery (the
restarted sender posts the event again), and through a Redis outage (the sender waits
it out, logging one line when it loses Redis and one when it is back); every delivery
signed over its time and body.
A replay (--from-start, --from-event) moves the group back, keeps its pending entries,
and never skips an event."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from tests.helpers import drain, stop_process, user_msg, worker_env
from tests.webhook_receiver import Receiver
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.embedded import EmbeddedRedis
from worker.errors import ConfigurationError
from worker.fleet.webhook import GROUP
from worker.fleet.webhook_start import place_group, replay_of
from worker.protocol import keys
from worker.protocol.webhook_signature import TOLERANCE_S, SignatureInvalid, verify

SECRET = "webhook-test-secret"  # noqa: S105 - a throwaway key for this test's receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver([500, 503])
    yield r
    r.close()


def start_sender(settings: Settings, url: str, log_dir: Path,
                 *start: str) -> subprocess.Popen[bytes]:
    """A sender; ``start``: --from-start for its first start (the events are older than the
    group), nothing for a restart, which goes on where the group was."""
    env = worker_env(settings, webhook_secret=SECRET)
    log = (log_dir / "webhook.log").open("ab")
    return subprocess.Popen([sys.executable, "-m", "worker.cli", "webhook", "--url", url,
                             "--consumer", "sender-1", *start],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


async def wait_until(check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout_s} s")


async def pending(redis: Redis, settings: Settings) -> int:
    """Events read and not acknowledged (-1: no sender has made its group yet)."""
    try:
        info = await redis.xpending(keys.events_key(settings.queue_name), GROUP)
    except ResponseError:
        return -1
    return int(info["pending"])


async def all_acknowledged(redis: Redis, settings: Settings) -> None:
    deadline = time.monotonic() + 10
    while await pending(redis, settings):
        assert time.monotonic() < deadline, "events left unacknowledged"
        await asyncio.sleep(0.1)


async def test_every_commit_reaches_the_receiver_signed_through_its_outage(
    settings: Settings, redis: Redis, receiver: Receiver, tmp_path: Path,
) -> None:
    for user in ("u1", "u2"):
        await schedule_memory_persistence(redis, "chat1", user, [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
    await drain(settings)
    sender = start_sender(settings, receiver.url, tmp_path, "--from-start")
    try:
        await wait_until(lambda: len(receiver.delivered()) == 2, 30)
        assert [p.status for p in receiver.requests][:2] == [500, 503], "tried again, not lost"
        entries = await redis.xrange(keys.events_key(settings.queue_name))
        assert set(receiver.delivered()) == {e.decode() for e, _ in entries}
        for post in receiver.requests:
            body = post.body
            # The wire format, by hand: t=<unix>,v1=hex(HMAC-SHA-256(secret, "<t>." + body)).
            stamp, mac = post.headers["x-memfleet-signature"].split(",")
            t = stamp.removeprefix("t=")
            assert abs(time.time() - int(t)) < 300
            assert mac == "v1=" + hmac.new(SECRET.encode(), f"{t}.".encode() + body,
                                           hashlib.sha256).hexdigest()
            assert verify(SECRET, post.headers["x-memfleet-signature"], body) == int(t)
            with pytest.raises(SignatureInvalid):  # a replay after the tolerance window
                verify(SECRET, post.headers["x-memfleet-signature"], body,
                       now=int(t) + TOLERANCE_S + 1)
            event = json.loads(body)
            assert event["id"] == post.headers["x-memfleet-event-id"], "the id is signed"
            assert event["outcome"] == "committed" and event["added"] == 1
            for said in (b"u1", b"u2", b"chat1", b"Zig"):
                assert said not in body
        await all_acknowledged(redis, settings)
    finally:
        stop_process(sender)


async def test_a_sender_killed_mid_delivery_posts_again_after_its_restart(
    settings: Settings, redis: Redis, tmp_path: Path,
) -> None:
    """The first sender's POST is never answered: only a POST by the restarted sender
    (the same consumer, reading its pending entries on start) can deliver the event."""
    receiver = Receiver([], hold_first=True)
    try:
        await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
        await drain(settings)
        (entry_id,) = [e.decode() for e, _ in
                       await redis.xrange(keys.events_key(settings.queue_name))]
        sender = start_sender(settings, receiver.url, tmp_path, "--from-start")
        try:
            # Read, posted, and waiting on an answer that never comes.
            await wait_until(lambda: len(receiver.requests) == 1, 30)
            assert await pending(redis, settings) == 1
            sender.kill()  # SIGKILL: read, posted, never acknowledged
            sender.wait()
        finally:
            stop_process(sender)
        first = receiver.requests[0]
        assert first.status is None and not receiver.delivered()
        assert await pending(redis, settings) == 1, "still pending after the kill"
        sender = start_sender(settings, receiver.url, tmp_path)
        try:
            await wait_until(lambda: entry_id in receiver.delivered(), 30)
            await all_acknowledged(redis, settings)
        finally:
            stop_process(sender)
        assert [(p.headers["x-memfleet-event-id"], p.status) for p in receiver.requests] == [
            (entry_id, None), (entry_id, 200)], "posted again by the restarted sender, once"
        second = receiver.requests[1]
        assert second.body == first.body
        verify(SECRET, second.headers["x-memfleet-signature"], second.body)
    finally:
        receiver.close()


async def add_entries(redis: Redis, events: str, count: int) -> list[str]:
    """Entries on the events stream; the group's position is all these tests look at."""
    return [(await redis.xadd(events, {"n": str(n)})).decode() for n in range(count)]


async def read_new(redis: Redis, events: str, count: int = 100) -> list[str]:
    answer = await redis.xreadgroup(GROUP, "sender-1", {events: ">"}, count=count)
    return [entry_id.decode() for entry_id, _ in (answer[0][1] if answer else [])]


async def test_from_start_moves_an_existing_group_back_and_keeps_its_pending_entries(
    settings: Settings, redis: Redis,
) -> None:
    events = keys.events_key(settings.queue_name)
    old = await add_entries(redis, events, 2)
    assert "a new group" in await place_group(redis, events, None)
    assert await read_new(redis, events) == [], "a new group starts from now"
    (new,) = await add_entries(redis, events, 1)
    assert await read_new(redis, events) == [new]  # read, never acknowledged: pending
    where = await place_group(redis, events, None)  # a restart without a flag
    assert f"left off (after {new})" in where and await read_new(redis, events) == []
    where = await place_group(redis, events, replay_of(True, None))
    assert where == "replaying every event kept (3), from the oldest"
    assert await pending(redis, settings) == 1, "the pending entry is still owed"
    assert await read_new(redis, events) == [*old, new]


async def test_a_replay_interrupted_goes_on_where_it_was_after_a_restart(
    settings: Settings, redis: Redis,
) -> None:
    events = keys.events_key(settings.queue_name)
    entries = await add_entries(redis, events, 4)
    await place_group(redis, events, replay_of(True, None))
    assert await read_new(redis, events, count=2) == entries[:2]
    await place_group(redis, events, None)  # the sender died mid-replay and came back
    assert await read_new(redis, events) == entries[2:]


async def test_from_event_sends_from_that_event_on_and_never_skips_one(
    settings: Settings, redis: Redis,
) -> None:
    events = keys.events_key(settings.queue_name)
    entries = await add_entries(redis, events, 4)
    await place_group(redis, events, replay_of(True, None))
    assert await read_new(redis, events, count=2) == entries[:2]
    with pytest.raises(ConfigurationError, match=f"would skip .* read up to {entries[1]}"):
        await place_group(redis, events, replay_of(False, entries[3]))
    assert await read_new(redis, events, count=1) == [entries[2]], "the group did not move"
    assert await place_group(redis, events, replay_of(False, entries[1])) == (
        f"replaying from event {entries[1]}")
    assert await read_new(redis, events) == entries[1:]
    # The next event after the last one read skips nothing: allowed.
    (fifth,) = await add_entries(redis, events, 1)
    await place_group(redis, events, replay_of(False, fifth))
    assert await read_new(redis, events) == [fifth]
    with pytest.raises(ConfigurationError, match="no such event yet"):
        await place_group(redis, events, replay_of(False, "99999999999999-0"))


async def test_from_event_before_the_oldest_kept_says_so_and_sends_every_event_kept(
    settings: Settings, redis: Redis,
) -> None:
    events = keys.events_key(settings.queue_name)
    entries = await add_entries(redis, events, 3)
    await redis.xtrim(events, maxlen=2, approximate=False)  # as XADD MAXLEN ~ does, later
    where = await place_group(redis, events, replay_of(False, entries[0]))
    assert where == (f"replaying from event {entries[0]}; events before {entries[1]} are "
                     "no longer kept")
    assert await read_new(redis, events) == entries[1:]


async def test_the_sender_outlives_a_redis_outage_and_says_so_twice(
    settings: Settings, tmp_path: Path,
) -> None:
    server = EmbeddedRedis(tmp_path / "aof-redis", appendonly=True)
    await asyncio.to_thread(server.start)
    settings = settings.model_copy(update={"redis_url": server.url})
    redis = Redis.from_url(server.url)
    receiver = Receiver([])
    try:
        await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
        await drain(settings)
        sender = start_sender(settings, receiver.url, tmp_path, "--from-start")
        try:
            await wait_until(lambda: len(receiver.delivered()) == 1, 30)
            await asyncio.to_thread(server.kill)
            await asyncio.sleep(4)  # several of the sender's tries
            assert sender.poll() is None, "the sender waits for Redis"
            await asyncio.to_thread(server.start)
            await schedule_memory_persistence(redis, "chat2", "u1", [user_msg("I use Go.")],
                                              queue_name=settings.queue_name)
            await drain(settings)
            await wait_until(lambda: len(receiver.delivered()) == 2, 30)
            assert sender.poll() is None
        finally:
            stop_process(sender)
    finally:
        receiver.close()
        await redis.aclose()
        await asyncio.to_thread(server.stop)
    log = (tmp_path / "webhook.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-2000:]
    assert log.count('"server away"') == 1 and log.count('"server back"') == 1, log[-2000:]
