"""What the memory API client's integration tests share: the API over real HTTP on
the LLM stub's embedder, service keys, and a real `memfleet worker` process that
commits through the stub (the fleet's telemetry key shared, so that the session
tags of the status route and of the commit events agree)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.api_server import api_settings, running_api
from tests.helpers import WorkerProcesses, worker_env
from tests.integration.api.conftest import ID_KEY
from tests.openai_stub import openai_settings
from worker.config import Settings


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    """Workers and API on the stub, with the fleet's telemetry key (session tags)."""
    return openai_settings(settings, stub, llm_timeout_s=5.0,
                           telemetry_id_key=SecretStr(ID_KEY))


@pytest.fixture
async def api_url(llm: Settings) -> AsyncIterator[str]:
    """The memory API (the product's app, uvicorn on a loopback port): its base URL."""
    async with running_api(api_settings(llm)) as url:
        yield url




@pytest.fixture
async def worker(llm: Settings, stub: StubServer, redis: Redis,
                 tmp_path: Path) -> AsyncIterator[WorkerProcesses]:
    """One real `memfleet worker` process on the test's PostgreSQL and Redis, its model
    and embeddings the stub; polling the queue when the fixture yields."""
    env = worker_env(llm, llm_provider="openai", llm_base_url=stub.v1,
                     embed_provider="openai", embed_base_url=stub.v1,
                     telemetry_id_key=ID_KEY)
    workers = WorkerProcesses(env, tmp_path, 1)
    try:
        await workers.up(redis, llm.queue_name)
        yield workers
    finally:
        await asyncio.to_thread(workers.stop)
