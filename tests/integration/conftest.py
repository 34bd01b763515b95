"""Fixtures of the integration tests: the memory API over real HTTP, the OpenAI-compatible stub."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from api_stub.llm_stub import StubServer
from tests.api_server import api_settings, running_api
from tests.conftest import TEST_EMBED_DIM
from worker.config import Settings
from worker.embedded import EmbeddedPostgres, EmbeddedRedis
from worker.store.migrate import migrate
from worker.store.service_keys import ServiceKeyStore


@pytest.fixture
def api_fleet(settings: Settings) -> Settings:
    """The settings ``api`` serves with: the tests' own; a module whose workers run on
    settings of its own (the LLM stub's) overrides this with those."""
    return settings


@pytest.fixture
async def api(
    api_fleet: Settings, request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the memory API served by uvicorn on a loopback port; with the chat
    stand-in mounted when the test is marked ``chat_standin``."""
    chat = request.node.get_closest_marker("chat_standin") is not None
    async with (
        running_api(api_settings(api_fleet, chat_standin=chat)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    """The OpenAI-compatible stub, one a test module (tests/openai_stub.py points settings
    at it); a module with a stub of its own defines its own ``stub``."""
    with StubServer(dim=TEST_EMBED_DIM) as server:
        yield server


@pytest.fixture
async def aof_redis(tmp_path: Path) -> AsyncIterator[EmbeddedRedis]:
    """A Redis of the test's own with its append-only file on, to SIGKILL and restart
    with its data (what production runs)."""
    server = EmbeddedRedis(tmp_path / "aof-redis", appendonly=True)
    await asyncio.to_thread(server.start)
    yield server
    await asyncio.to_thread(server.stop)


@pytest.fixture
async def own_postgres(tmp_path: Path) -> AsyncIterator[EmbeddedPostgres]:
    """A migrated PostgreSQL of the test's own, to SIGKILL and restart."""
    server = EmbeddedPostgres(tmp_path / "pg")
    await asyncio.to_thread(server.start)
    await migrate(server.url, embed_dim=TEST_EMBED_DIM)
    yield server
    await asyncio.to_thread(server.stop)


@pytest.fixture
async def keys(database_url: str) -> AsyncIterator[ServiceKeyStore]:
    """The service keys of the test's database (``memfleet keys`` does the same)."""
    store = await ServiceKeyStore.connect(database_url)
    try:
        yield store
    finally:
        await store.aclose()
