"""What the API's integration tests share beyond tests/integration/conftest.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from api_stub.llm_stub import StubServer
from tests.api_server import api_settings, running_api
from tests.openai_stub import openai_settings
from worker.config import Settings

# The fleet's telemetry key, shared by the workers and the API: the session tags of
# the status route and of the commit events are then the same.
ID_KEY = "session-tags-shared-by-the-fleet-and-the-api"


@pytest.fixture
def llm(settings: Settings, stub: StubServer) -> Settings:
    """Workers and API on the stub, with the fleet's telemetry key (session tags)."""
    return openai_settings(settings, stub, extract_model="stub-extract",
                           consolidate_model="stub-consolidate",
                           telemetry_id_key=SecretStr(ID_KEY))


@pytest.fixture
async def client(llm: Settings, request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    """The memory API on ``llm``'s settings, over real HTTP; with the chat stand-in
    mounted when the test is marked ``chat_standin``."""
    chat = request.node.get_closest_marker("chat_standin") is not None
    async with (running_api(api_settings(llm, chat_standin=chat)) as base_url,
                httpx.AsyncClient(base_url=base_url, timeout=60) as api):
        yield api



def key_auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class SseReader:
    """An open ``GET /events`` answer, read as server-sent events."""

    def __init__(self, stream: httpx.Response) -> None:
        self._lines = stream.aiter_lines()
        self.comments: list[str] = []

    async def events(self, count: int, *, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """The next ``count`` events, each {"id", "event", "data"} (data parsed); the
        comments met on the way (``: keep-alive``) go to ``comments``."""
        events: list[dict[str, Any]] = []
        fields: dict[str, Any] = {}
        async with asyncio.timeout(timeout_s):
            while len(events) < count:
                line = await anext(self._lines)
                if line.startswith(":"):
                    self.comments.append(line)
                elif line:
                    name, _, value = line.partition(": ")
                    fields[name] = json.loads(value) if name == "data" else value
                elif fields:
                    events.append(fields)
                    fields = {}
        return events

    async def comment(self, *, timeout_s: float) -> str:
        """The next comment line; an event before it is a failure."""
        async with asyncio.timeout(timeout_s):
            while not (line := await anext(self._lines)):
                pass
        assert line.startswith(":"), line
        return line

    async def rest(self, *, timeout_s: float) -> list[str]:
        """Every line up to the end of the answer (the server ended the stream)."""
        async with asyncio.timeout(timeout_s):
            return [line async for line in self._lines]
