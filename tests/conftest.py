"""Shared fixtures: throwaway servers the tests start themselves.

One embedded PostgreSQL (with pgvector) and one Redis-compatible server per
test session, in a temporary directory. The schema is migrated once into a
template database; each test gets its own database cloned from it, so tests
stay fast and never see each other's data.

Under pytest-xdist (`make test`: ``-n TEST_WORKERS --dist loadfile``) each worker
process is a session of its own: its own servers, on ports the kernel picks, in
its own folder of the run's temporary directory (below). Nothing here is shared
between workers but that directory, which the controller makes and removes.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from worker.config import Settings
from worker.embedded import EmbeddedPostgres, EmbeddedRedis
from worker.store.migrate import migrate

TEST_EMBED_DIM = 256
# MEMFLEET_ERASE_FENCE_KEY of every test process and the workers they start.
TEST_FENCE_KEY = "test-erase-fence-key-0123456789abcdef"
TEMPLATE_DB = "memfleet_template"


@pytest.hookimpl(tryfirst=True)  # before pytest's own tmp_path set-up reads the option
def pytest_configure(config: pytest.Config) -> None:
    """Temporary directories of this session's own, not under /tmp/pytest-of-<user>:
    every pytest session that starts strips that directory to mode 0700, which cuts
    the embedded PostgreSQL servers of any other session still running (they run as
    another account when the tests run as root) off from their data directories.

    Under pytest-xdist this makes the directory in the controller only: xdist gives each
    worker a folder of it (``popen-gw0``...) as the worker's own basetemp, so a worker finds
    the option set, and the controller's pytest_sessionfinish removes every worker's files."""
    if config.option.basetemp is None:
        config.option.basetemp = tempfile.mkdtemp(prefix="memfleet-pytest-")
        config.stash[_OWN_BASETEMP] = config.option.basetemp


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own is None:
        return
    if exitstatus == 0:
        shutil.rmtree(own, ignore_errors=True)
    else:  # kept for a look at the servers' logs
        session.config.stash[_KEPT_BASETEMP] = own


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    kept = terminalreporter.config.stash.get(_KEPT_BASETEMP, None)
    if kept is not None:
        terminalreporter.write_line(f"temporary directories kept in {kept}")


_OWN_BASETEMP = pytest.StashKey[str]()
_KEPT_BASETEMP = pytest.StashKey[str]()


def _with_db(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data", durable=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def template_url(pg_server: EmbeddedPostgres) -> str:
    async def build() -> None:
        conn = await asyncpg.connect(pg_server.url)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE_DB}")
            await conn.execute(f"CREATE DATABASE {TEMPLATE_DB}")
        finally:
            await conn.close()
        await migrate(_with_db(pg_server.url, TEMPLATE_DB), embed_dim=TEST_EMBED_DIM)

    asyncio.run(build())
    return _with_db(pg_server.url, TEMPLATE_DB)


@asynccontextmanager
async def throwaway_database(server: EmbeddedPostgres, template: str | None) -> AsyncIterator[str]:
    """A database of the test's own, from ``template`` (None: empty), dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(server.url)
    try:
        # FILE_COPY: the template's files copied whole, about half the time of the default
        # WAL_LOG's block-by-block copy for a schema of many relations (partitions).
        from_template = f" TEMPLATE {template} STRATEGY FILE_COPY" if template else ""
        await conn.execute(f"CREATE DATABASE {name}{from_template}")
    finally:
        await conn.close()
    try:
        yield _with_db(server.url, name)
    finally:
        conn = await asyncpg.connect(server.url)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            await conn.close()


@pytest.fixture
async def database_url(pg_server: EmbeddedPostgres, template_url: str) -> AsyncIterator[str]:
    async with throwaway_database(pg_server, TEMPLATE_DB) as url:
        yield url


@pytest.fixture
async def empty_database_url(pg_server: EmbeddedPostgres) -> AsyncIterator[str]:
    """Not migrated: for tests of migration itself."""
    async with throwaway_database(pg_server, None) as url:
        yield url


@pytest.fixture
async def redis_url(redis_server: EmbeddedRedis) -> AsyncIterator[str]:
    # The server is this test session's own: flushing it touches nobody else's data.
    client = Redis.from_url(redis_server.url)
    await client.flushall()
    await client.aclose()
    yield redis_server.url


@pytest.fixture
def settings(database_url: str, redis_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        redis_url=redis_url,
        home_dir=tmp_path / "home",
        embed_dim=TEST_EMBED_DIM,
        lock_ttl_s=5,
        busy_defer_s=0.05,
        job_timeout_s=30,
        erase_fence_key=TEST_FENCE_KEY,
    )


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()
