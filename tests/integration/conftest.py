"""Fixtures of the integration tests: the memory API over real HTTP, the OpenAI-compatible stub."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from api_stub.llm_stub import StubServer
from tests.api_server import api_settings, running_api
from tests.conftest import TEST_EMBED_DIM
from worker.config import Settings


@pytest.fixture
async def api(
    settings: Settings, request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the memory API served by uvicorn on a loopback port; with the chat
    stand-in mounted when the test is marked ``chat_standin``."""
    chat = request.node.get_closest_marker("chat_standin") is not None
    async with (
        running_api(api_settings(settings, chat_standin=chat)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    """The OpenAI-compatible stub, one a test module (tests/openai_stub.py points settings
    at it); a module with a stub of its own defines its own ``stub``."""
    with StubServer(dim=TEST_EMBED_DIM) as server:
        yield server
