"""`memfleet webhook` as an operator meets it in the first hour, each case a subprocess: a
URL or a start it cannot use exits 2 with one `memfleet: ...` line and no traceback; a
sender says on stderr, first, whether it signs; `--from-start` on a group that exists
sends every event again, in order, to a real receiver, and `--from-event` from an id."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.helpers import drain, eventually, stop_process, user_msg, worker_env
from tests.webhook_receiver import Receiver
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.webhook import GROUP
from worker.protocol import keys

SECRET = "webhook-secret-0123456789"  # noqa: S105 - a throwaway key
UNRESOLVABLE = "receiver.invalid"  # RFC 2606: never a real name


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def webhook(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.cli", "webhook", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def closed_servers(**extra: str) -> dict[str, str]:
    """No MEMFLEET_ setting but servers on a closed port: a refusal that came after the
    Redis check would be Redis's line, not its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    unused = f"127.0.0.1:{closed_port()}"
    return {**env, "MEMFLEET_REDIS_URL": f"redis://{unused}",
            "MEMFLEET_DATABASE_URL": f"postgresql://u@{unused}/db", **extra}


def refused(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert done.stdout == "" and len(lines) == 1, done.stderr
    assert lines[0].startswith("memfleet: ") and "Traceback" not in done.stderr
    assert SECRET not in done.stderr
    return lines[0]


@pytest.mark.parametrize(("url", "says"), [
    ("notaurl", "must be an http:// or https:// URL"),
    ("http://127.0.0.1:0/hook", "a port from 1 to 65535"),
    ("http://exa mple.com/hook", "a host (a DNS name or an IP address)"),
    ("ftp://127.0.0.1/hook", "must be an http:// or https:// URL"),
])
def test_a_url_it_cannot_post_to_exits_2(url: str, says: str) -> None:
    assert says in refused(webhook(closed_servers(MEMFLEET_WEBHOOK_SECRET=SECRET), "--url", url))


def test_a_host_that_does_not_exist_exits_2_before_redis() -> None:
    try:
        socket.getaddrinfo(UNRESOLVABLE, None)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_NONAME:
            pytest.skip(f"this machine's resolver does not answer ({exc.strerror})")
    else:
        pytest.skip(f"this machine's resolver answers for {UNRESOLVABLE}")
    line = refused(webhook(closed_servers(MEMFLEET_WEBHOOK_SECRET=SECRET),
                           "--url", f"https://{UNRESOLVABLE}/hook"))
    assert f"{UNRESOLVABLE} does not resolve" in line


def test_no_secret_without_unsigned_exits_2() -> None:
    line = refused(webhook(closed_servers(), "--url", "http://127.0.0.1:9/hook"))
    assert "MEMFLEET_WEBHOOK_SECRET" in line and "--unsigned" in line


@pytest.mark.parametrize("argv", [["--from-event", "yesterday"],
                                  ["--from-start", "--from-event", "1-0"]])
def test_a_start_it_cannot_read_exits_2(argv: list[str]) -> None:
    line = refused(webhook(closed_servers(MEMFLEET_WEBHOOK_SECRET=SECRET),
                           "--url", "http://127.0.0.1:9/hook", *argv))
    assert "--from-event" in line


class Sender:
    """`memfleet webhook` running, its stderr in a file: the start line, then the logs."""

    def __init__(self, settings: Settings, url: str, path: Path, *argv: str,
                 **extra: str) -> None:
        self.path = path
        with path.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "worker.cli", "webhook", "--url", url, *argv],
                env=worker_env(settings, **extra), stdout=subprocess.DEVNULL, stderr=err)

    def first_line(self) -> str:
        deadline = time.monotonic() + 30
        while "\n" not in (text := self.path.read_text()):
            assert self.proc.poll() is None, text
            assert time.monotonic() < deadline, "no start line"
            time.sleep(0.05)
        assert "Traceback" not in text
        return text.splitlines()[0]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver([])
    yield r
    r.close()


async def hand_over(settings: Settings, redis: Redis, *users: str) -> None:
    for user in users:
        await schedule_memory_persistence(redis, "chat1", user, [user_msg("I use Zig.")],
                                          queue_name=settings.queue_name)
    await drain(settings)


async def posted_after(receiver: Receiver, before: int, count: int) -> list[str]:
    """The event ids of the next ``count`` POSTs after the first ``before``."""
    deadline = time.monotonic() + 30
    while len(receiver.requests) < before + count:
        assert time.monotonic() < deadline, [p.status for p in receiver.requests]
        await asyncio.sleep(0.05)
    return [p.headers["x-memfleet-event-id"] for p in receiver.requests[before:]]


async def all_acknowledged(redis: Redis, settings: Settings) -> None:
    """Wait until the sender acknowledged what it POSTed: stopped before that, it would
    leave the event pending, and the next sender sends it once more first (at least once,
    as documented), which is not what these tests look at."""
    async def none_pending() -> bool:
        summary = await redis.xpending(keys.events_key(settings.queue_name), GROUP)
        return int(summary["pending"]) == 0
    await eventually(none_pending, 10)


async def test_from_start_sends_every_event_again_to_a_receiver_that_had_them(
    settings: Settings, redis: Redis, receiver: Receiver, tmp_path: Path,
) -> None:
    secret = {"webhook_secret": SECRET}
    await hand_over(settings, redis, "u1", "u2")
    first = Sender(settings, receiver.url, tmp_path / "1.err", "--from-start", **secret)
    try:
        line = first.first_line()
        assert line.startswith(f"memfleet webhook: POSTing commit events to {receiver.url}, "
                               "signed (X-Memfleet-Signature")
        assert line.endswith("; replaying every event kept (2), from the oldest")
        e1, e2 = await posted_after(receiver, 0, 2)
        await all_acknowledged(redis, settings)
    finally:
        stop_process(first.proc)
    await hand_over(settings, redis, "u3")
    restarted = Sender(settings, receiver.url, tmp_path / "2.err", **secret)
    try:
        assert restarted.first_line().endswith(f"from where group memfleet-webhook left off "
                                               f"(after {e2})")
        (e3,) = await posted_after(receiver, 2, 1)  # a replay would have sent e1 first
        await all_acknowledged(redis, settings)
    finally:
        stop_process(restarted.proc)
    assert [e.decode() for e, _ in await redis.xrange(keys.events_key(settings.queue_name))] == [
        e1, e2, e3]
    mark = len(receiver.requests)
    replay = Sender(settings, receiver.url, tmp_path / "3.err", "--from-start", **secret)
    try:
        assert replay.first_line().endswith("replaying every event kept (3), from the oldest")
        assert await posted_after(receiver, mark, 3) == [e1, e2, e3], "every event, in order"
        await all_acknowledged(redis, settings)
    finally:
        stop_process(replay.proc)
    mark = len(receiver.requests)
    from_e2 = Sender(settings, receiver.url, tmp_path / "4.err", "--from-event", e2, **secret)
    try:
        assert from_e2.first_line().endswith(f"replaying from event {e2}")
        assert await posted_after(receiver, mark, 2) == [e2, e3]
    finally:
        stop_process(from_e2.proc)
    assert all(p.status == 200 and "x-memfleet-signature" in p.headers
               for p in receiver.requests)
    # A replay past what the group read would skip events: refused, in one line.
    await hand_over(settings, redis, "u4", "u5")
    e5 = (await redis.xrevrange(keys.events_key(settings.queue_name), count=1))[0][0].decode()
    line = refused(webhook(worker_env(settings, webhook_secret=SECRET), "--url", receiver.url,
                           "--from-event", e5))
    assert "would skip events" in line and f"read up to {e3}" in line
    line = refused(webhook(worker_env(settings, webhook_secret=SECRET), "--url", receiver.url,
                           "--from-event", "99999999999999-0"))
    assert "no such event yet" in line


async def test_unsigned_deliveries_are_announced_and_carry_no_signature(
    settings: Settings, redis: Redis, receiver: Receiver, tmp_path: Path,
) -> None:
    await hand_over(settings, redis, "u1")
    sender = Sender(settings, receiver.url, tmp_path / "err", "--from-start", "--unsigned")
    try:
        line = sender.first_line()
        assert f"to {receiver.url}, UNSIGNED, as chosen (--unsigned" in line
        await posted_after(receiver, 0, 1)
    finally:
        stop_process(sender.proc)
    assert "x-memfleet-signature" not in receiver.requests[0].headers
