"""One user's downloads never stall anyone else: exports against a real API server process
(``memfleet api``) whose clients open downloads and never read them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.api_server import api_process, bearer, token
from worker.api.settings import ApiSettings
from worker.config import Settings
from worker.errors import StoreUnavailable
from worker.ops.access_export import spool_export
from worker.store.maintenance import PostgresMaintenanceStore
from worker.store.pool import create_pool

UNREAD = 12
# Coarse bounds (a loaded 2-core CI): an ordinary request normally takes milliseconds.
ANSWER_BOUND_S = 10.0
HEAD_WAIT_S = 60.0  # returns as soon as every download has its answer's head
# mallory's export: about 7 MB of JSON, more than loopback socket buffers take in (4 MB).
HEAVY_FACTS, HEAVY_CHARS = 3000, 2000
PER_USER_DEFAULT = ApiSettings.model_fields["api_exports_per_user"].default


@contextlib.contextmanager
def unread_downloads(base: str, user: str, count: int) -> Iterator[list[socket.socket]]:
    """``count`` export requests whose sockets never read a byte of the answer."""
    host, port = base.removeprefix("http://").split(":")
    request = (f"GET /users/{user}/export HTTP/1.1\r\nHost: {host}\r\n"
               f"Authorization: Bearer {token(user)}\r\n\r\n").encode()
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a slow reader
            sock.connect((host, int(port)))
            sock.sendall(request)
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


async def answered_heads(socks: list[socket.socket], deadline_s: float) -> list[bytes]:
    """The status lines the server has sent so far (peeked: nothing is consumed), once
    every socket has one or the deadline passed."""
    deadline = time.monotonic() + deadline_s
    while True:
        readable, _, _ = select.select(socks, [], [], 0)
        if len(readable) == len(socks) or time.monotonic() > deadline:
            return [s.recv(512, socket.MSG_PEEK).split(b"\r\n", 1)[0] for s in readable]
        await asyncio.sleep(0.05)


async def timed(client: httpx.AsyncClient, path: str, user: str) -> tuple[int | str, float]:
    started = time.monotonic()
    try:
        resp = await client.get(path, headers=bearer(user), timeout=ANSWER_BOUND_S * 2)
        outcome: int | str = resp.status_code
    except httpx.TimeoutException as exc:
        outcome = type(exc).__name__
    return outcome, time.monotonic() - started


async def heavy_user(db: asyncpg.Connection, settings: Settings, user: str,
                     facts: int = HEAVY_FACTS) -> None:
    await db.execute(
        "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
        " embedding_model, observed_at)"
        " SELECT $1, n || ' ' || repeat('x', $3), 'fact', 5,"
        " array_fill(0.1::real, ARRAY[$2::int])::halfvec, 'test', now()"
        " FROM generate_series(1, $4::int) AS n",
        user, settings.embed_dim, HEAVY_CHARS, facts)


async def open_transactions(db: asyncpg.Connection) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()")
    return count


async def test_twelve_unread_exports_leave_another_users_request_answered(
    settings: Settings, db: asyncpg.Connection, tmp_path: Path
) -> None:
    """It hung: each export held a pooled connection in a transaction while its client
    did not read, and twelve took the whole pool (10) and queued behind it."""
    await heavy_user(db, settings, "mallory")
    async with api_process(settings, tmp_path / "api.log") as base, \
            httpx.AsyncClient(base_url=base) as client:
        assert (await client.get("/users/bob/facts", headers=bearer("bob"))).status_code == 200
        with unread_downloads(base, "mallory", UNREAD) as socks:
            heads = await answered_heads(socks, HEAD_WAIT_S)
            facts, facts_s = await timed(client, "/users/bob/facts", "bob")
            export, export_s = await timed(client, "/users/bob/export", "bob")
            print(f"\n{UNREAD} unread exports: bob's facts {facts} in {facts_s:.2f} s, "
                  f"bob's export {export} in {export_s:.2f} s; heads {heads}")
            assert facts == 200 and facts_s < ANSWER_BOUND_S, (facts, facts_s)
            assert export == 200 and export_s < ANSWER_BOUND_S, (export, export_s)
            # Every download is answered at once: a few streaming, the rest refused.
            assert len(heads) == UNREAD, heads
            assert heads.count(b"HTTP/1.1 200 OK") == PER_USER_DEFAULT
            assert all(h in (b"HTTP/1.1 200 OK", b"HTTP/1.1 429 Too Many Requests")
                       for h in heads), heads
            refused = next(s for s in socks if s.recv(512, socket.MSG_PEEK).startswith(
                b"HTTP/1.1 429"))
            assert b"retry-after:" in refused.recv(512, socket.MSG_PEEK).lower()


async def test_exports_streaming_to_stalled_clients_pin_no_pooled_connection(
    settings: Settings, db: asyncpg.Connection, tmp_path: Path
) -> None:
    """With the per-user bound lifted, twelve stalled downloads all stream at once, and
    the pool stays free: each snapshot was read to a spool, its connection given back."""
    await heavy_user(db, settings, "mallory")
    # Snapshots are read a few at a time: here each may wait for its turn as long as needed.
    async with api_process(settings, tmp_path / "api.log", api_exports_per_user="12",
                           api_exports_max="12", api_export_acquire_timeout_s="120") as base, \
            httpx.AsyncClient(base_url=base) as client:
        with unread_downloads(base, "mallory", UNREAD) as socks:
            heads = await answered_heads(socks, HEAD_WAIT_S)
            facts, facts_s = await timed(client, "/users/bob/facts", "bob")
            in_transaction = await open_transactions(db)
            print(f"\n{UNREAD} streaming exports: bob's facts {facts} in {facts_s:.2f} s, "
                  f"{in_transaction} connections idle in transaction; heads {heads}")
            assert facts == 200 and facts_s < ANSWER_BOUND_S, (facts, facts_s)
            assert heads == [b"HTTP/1.1 200 OK"] * UNREAD, heads
            assert in_transaction == 0


async def test_a_stalled_download_is_cut_and_gives_its_slot_back(
    settings: Settings, db: asyncpg.Connection, tmp_path: Path
) -> None:
    await heavy_user(db, settings, "mallory")
    async with api_process(settings, tmp_path / "api.log", api_send_timeout_s="1") as base, \
            httpx.AsyncClient(base_url=base, timeout=30) as client:
        with unread_downloads(base, "mallory", 2) as socks:
            assert await answered_heads(socks, HEAD_WAIT_S) == [b"HTTP/1.1 200 OK"] * 2
            # Both of mallory's slots are taken until the stalled sends time out.
            deadline, statuses = time.monotonic() + 30, []
            while time.monotonic() < deadline:
                resp = await client.get("/users/mallory/export", headers=bearer("mallory"))
                statuses.append(resp.status_code)
                if resp.status_code == 200:
                    assert len(resp.json()["facts"]) == HEAVY_FACTS
                    break
                assert resp.status_code == 429 and int(resp.headers["retry-after"]) >= 1
                await asyncio.sleep(0.2)
            assert statuses[0] == 429 and statuses[-1] == 200, statuses
            # The server aborted the stalled connections (a reset, not a close that
            # would wait with full buffers for a reader that never comes).
            for sock in socks:
                sock.settimeout(30)  # a socket.timeout here: the connection is still open
                received = 0
                with pytest.raises(ConnectionResetError):
                    while chunk := sock.recv(1 << 20):
                        received += len(chunk)
                assert received < HEAVY_FACTS * HEAVY_CHARS, "cut, not delivered whole"


async def test_the_process_bound_answers_503_past_it(
    settings: Settings, db: asyncpg.Connection, tmp_path: Path
) -> None:
    await heavy_user(db, settings, "mallory")
    async with api_process(settings, tmp_path / "api.log", api_exports_per_user="12",
                           api_exports_max="1") as base:
        with unread_downloads(base, "mallory", 3) as socks:
            heads = sorted(await answered_heads(socks, HEAD_WAIT_S))
            assert heads == [b"HTTP/1.1 200 OK"] + [b"HTTP/1.1 503 Service Unavailable"] * 2
            refused = [s.recv(1024, socket.MSG_PEEK).lower() for s in socks]
            assert all(b"retry-after:" in r for r in refused if b" 503 " in r)


async def test_a_spool_holds_bounded_memory_and_waits_for_a_connection_only_so_long(
    settings: Settings, db: asyncpg.Connection
) -> None:
    """Memory stays bounded whatever the user's size (a 21 MiB export here); no
    connection within the acquire timeout is StoreUnavailable (a 503), not a hang."""
    await heavy_user(db, settings, "mallory", facts=3 * HEAVY_FACTS)
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=1)
    store = PostgresMaintenanceStore(pool)
    try:
        tracemalloc.start()
        try:
            spool = await spool_export(store, "mallory", memory_default=True,
                                       acquire_timeout_s=5, read_timeout_s=60)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        with spool:
            size = spool.seek(0, 2)
            spool.seek(0)
            export = json.loads(spool.read())
        assert len(export["facts"]) == 3 * HEAVY_FACTS
        print(f"\nspooled {size / 2**20:.1f} MiB with a peak of {peak / 2**20:.1f} MiB in memory")
        # The spool keeps 1 MiB in memory and the rest on disk; the rows come 500 at a time.
        assert size > 20 * 2**20 and peak < 6 * 2**20, (size, peak)
        async with pool.acquire():  # the pool's only connection, held
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="no database connection"):
                await spool_export(store, "mallory", memory_default=True,
                                   acquire_timeout_s=1, read_timeout_s=60)
            assert time.monotonic() - started < ANSWER_BOUND_S
    finally:
        await pool.close()
