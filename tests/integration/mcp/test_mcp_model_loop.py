"""A model calls the memory tools through `memfleet mcp`, end to end: the project's
stub model, over the real ``openai`` client, is given the MCP server's tool list in
the OpenAI tools format (from ``session.list_tools()``) and answers scripted tool
calls; the loop forwards each to the server with the `mcp` SDK's own client
(``session.call_tool``), over stdio and over streamable HTTP, and sends the results
back to the model. What was stored and forgotten is checked through the memory API,
for that user only; another user's facts are out of reach; memory off stores nothing."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import ClientSession
from mcp.types import TextContent, Tool
from openai import AsyncOpenAI

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.api_server import token
from tests.integration.client.test_memory_tools_e2e import calls, tool_results
from tests.integration.mcp.conftest import http_session, new_key, stdio_session
from worker.client import AsyncMemoryApi
from worker.client.memory_tools import memory_tool_definitions
from worker.store.service_keys import ServiceKeyStore

TRANSPORTS = ["stdio", "http"]
AGENT = "coach"


def openai_tools(listed: list[Tool]) -> list[dict[str, Any]]:
    """An MCP server's tools as the OpenAI chat-completions ``tools`` parameter."""
    return [{"type": "function",
             "function": {"name": t.name, "description": t.description or "",
                          "parameters": t.inputSchema}} for t in listed]


async def model_loop(mcp: ClientSession, model: AsyncOpenAI,
                     messages: list[dict[str, Any]]) -> str:
    """docs/mcp.md's loop: the model's tool calls go to the MCP server until it
    answers in text; that text."""
    tools = openai_tools((await mcp.list_tools()).tools)
    while True:
        completion = await model.chat.completions.create(
            model="stub", messages=messages, tools=tools)  # type: ignore[arg-type]
        message = completion.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = await mcp.call_tool(call.function.name,  # type: ignore[union-attr]
                                         json.loads(call.function.arguments))  # type: ignore[union-attr]
            content = result.content[0]
            assert isinstance(content, TextContent)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content.text})


async def turn(mcp: ClientSession, stub: StubServer, said: str,
               *answers: dict[str, Any]) -> list[dict[str, Any]]:
    """One user turn where the model answers ``answers`` (tool calls, then text); the
    tool results the model got back."""
    stub.control("DELETE", "/_stub/requests")
    stub.script(*answers)
    async with AsyncOpenAI(base_url=stub.v1, api_key="none", max_retries=0) as model:
        reply = await model_loop(mcp, model, [
            {"role": "system", "content": "You are a coach."}, {"role": "user", "content": said}])
    assert reply == answers[-1]["content"]
    return tool_results(stub)


@pytest.fixture
async def admin(api_url: str, keys: ServiceKeyStore) -> AsyncIterator[AsyncMemoryApi]:
    """The API as an operator sees it: to set up and to check what the model did."""
    async with AsyncMemoryApi(api_url, service_key=await new_key(keys, "read", "admin"),
                              timeout_s=30) as api:
        yield api


@pytest.fixture
def session_for(request: pytest.FixtureRequest, api_url: str, keys: ServiceKeyStore) -> Any:
    """An MCP session for a user as the coach, over the test's transport: stdio with a
    service key named at start, or HTTP (`memfleet mcp --http`) with the user's token."""
    transport: str = request.param

    @contextlib.asynccontextmanager
    async def opened(user: str) -> AsyncIterator[ClientSession]:
        if transport == "stdio":
            key = await new_key(keys, "read", "admin")
            async with stdio_session(api_url, user, agent=AGENT,
                                     MEMFLEET_SERVICE_KEY=key) as mcp:
                yield mcp
        else:
            url: str = request.getfixturevalue("mcp_url")
            async with http_session(url, {"Authorization": f"Bearer {token(user)}",
                                          "X-Memfleet-Agent": AGENT}) as mcp:
                yield mcp

    return opened


@pytest.mark.parametrize("session_for", TRANSPORTS, indirect=True)
async def test_a_model_saves_searches_and_forgets_through_memfleet_mcp(
    session_for: Any, admin: AsyncMemoryApi, stub: StubServer,
) -> None:
    bobs = await admin.add_fact("bob", "Keeps a secret diary", category="fact")
    async with session_for("ada") as mcp:
        (saved,) = await turn(mcp, stub, "Remember that I like green tea.",
                              calls(("save_memory", {"text": "Likes green tea",
                                                     "category": "preference"})),
                              {"content": "Noted: you like green tea."})
        # The model was offered the MCP server's tools: the shared definitions, unchanged.
        first = next(r["body"] for r in stub.recorded() if r["path"] == CHAT_PATH)
        assert first["tools"] == memory_tool_definitions()
        assert saved["ok"] is True
        fact_id = saved["saved"]["id"]
        stored = (await admin.fact_chain("ada", fact_id)).versions[-1]
        assert (stored.text, stored.source_kind, stored.scope) == (
            "Likes green tea", "manual", "profile")
        assert [f.text for f in (await admin.facts("ada", scope="all")).facts] == [
            "Likes green tea"]

        found, secret, listed, forget_bobs = await turn(
            mcp, stub, "What do I drink, and what are Bob's secrets?",
            calls(("search_memory", {"query": "green tea"}),
                  ("search_memory", {"query": "secret diary"}),
                  ("list_memory", {}),
                  ("forget_memory", {"fact_id": bobs.id})),
            {"content": "Green tea; I know nothing of Bob."})
        assert [r["id"] for r in found["results"]] == [fact_id]
        assert all("diary" not in r["text"] for r in secret["results"])
        assert [f["id"] for f in listed["facts"]] == [fact_id]
        assert forget_bobs["error"] == "not_found"

        forgotten, after = await turn(
            mcp, stub, "Forget the tea thing.",
            calls(("forget_memory", {"fact_id": fact_id}), ("list_memory", {})),
            {"content": "Forgotten."})
        assert forgotten["ok"] is True and after["count"] == 0
    (version,) = (await admin.fact_chain("ada", fact_id)).versions
    assert version.superseded_at is not None  # forget supersedes, never deletes
    assert (await admin.facts("ada")).count == 0
    # bob's memory: untouched, nothing of ada's in it
    assert [f.id for f in (await admin.facts("bob", scope="all")).facts] == [bobs.id]
    assert (await admin.fact_chain("bob", bobs.id)).versions[-1].superseded_at is None


@pytest.mark.parametrize("session_for", TRANSPORTS, indirect=True)
async def test_memory_off_a_models_save_stores_nothing(
    session_for: Any, admin: AsyncMemoryApi, stub: StubServer,
) -> None:
    await admin.set_consent("cy", False)
    async with session_for("cy") as mcp:
        saved, searched = await turn(mcp, stub, "Remember my PIN is 1234.",
                                     calls(("save_memory", {"text": "PIN is 1234"}),
                                           ("search_memory", {"query": "PIN"})),
                                     {"content": "Memory is off, so I did not save it."})
    assert saved["error"] == searched["error"] == "memory_off"
    assert (await admin.facts("cy", scope="all")).count == 0
    assert (await admin.export("cy")).facts == []
