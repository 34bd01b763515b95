"""Fixtures of the integration tests that talk to the memory API over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.api_server import api_settings, running_api
from worker.config import Settings


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the memory API served by uvicorn on a loopback port."""
    async with (
        running_api(api_settings(settings)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as client,
    ):
        yield client
