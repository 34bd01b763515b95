"""`memfleet webhook` delivers every commit event to a receiver, at least once: through
a receiver that is down for a while, and through a sender SIGKILLed mid-delivery."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from tests.helpers import drain, stop_process, user_msg, worker_env
from worker import queue
from worker.client import schedule_memory_persistence
from worker.config import Settings
from worker.webhook import GROUP

SECRET = "webhook-test-secret"  # noqa: S105 - a throwaway key for this test's receiver


class Receiver:
    """A webhook receiver on loopback: answers ``statuses`` in turn (then 200), records
    every request, and holds requests while ``hold`` is set."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.requests: list[tuple[dict[str, str], bytes, int]] = []
        self.hold = threading.Event()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                if receiver.hold.is_set():
                    receiver.release.wait(30)
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()},
                                          body, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self) -> dict[str, bytes]:
        """Event id -> body, for requests answered 2xx."""
        return {h["x-memfleet-event-id"]: b for h, b, s in self.requests if s < 300}

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver([500, 503])
    yield r
    r.close()


def start_sender(settings: Settings, url: str, log_dir: Path) -> subprocess.Popen[bytes]:
    env = worker_env(settings, webhook_secret=SECRET)
    log = (log_dir / "webhook.log").open("ab")
    return subprocess.Popen([sys.executable, "-m", "worker.cli", "webhook", "--url", url,
                             "--consumer", "sender-1", "--from-start"],
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
        info = await redis.xpending(queue.events_key(settings.queue_name), GROUP)
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
    sender = start_sender(settings, receiver.url, tmp_path)
    try:
        await wait_until(lambda: len(receiver.delivered()) == 2, 30)
        assert [s for _, _, s in receiver.requests][:2] == [500, 503], "tried again, not lost"
        entries = await redis.xrange(queue.events_key(settings.queue_name))
        assert set(receiver.delivered()) == {e.decode() for e, _ in entries}
        for headers, body, _status in receiver.requests:
            expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert headers["x-memfleet-signature"] == expected
            event = json.loads(body)
            assert event["outcome"] == "committed" and event["added"] == 1
            for said in (b"u1", b"u2", b"chat1", b"Zig"):
                assert said not in body
        await all_acknowledged(redis, settings)
    finally:
        stop_process(sender)


async def test_a_sender_killed_mid_delivery_delivers_after_its_restart(
    settings: Settings, redis: Redis, tmp_path: Path,
) -> None:
    receiver = Receiver([])
    try:
        receiver.hold.set()  # the first POST hangs in the receiver
        await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
        await drain(settings)
        sender = start_sender(settings, receiver.url, tmp_path)
        try:
            async def read_not_acknowledged() -> bool:
                return await pending(redis, settings) == 1

            deadline = time.monotonic() + 15
            while not await read_not_acknowledged():  # read, and waiting on its POST
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
            sender.kill()  # SIGKILL: read, posted, never acknowledged
            sender.wait()
        finally:
            stop_process(sender)
        receiver.hold.clear()
        receiver.release.set()
        sender = start_sender(settings, receiver.url, tmp_path)
        try:
            await wait_until(lambda: len(receiver.delivered()) == 1, 30)
            await all_acknowledged(redis, settings)
        finally:
            stop_process(sender)
    finally:
        receiver.close()
