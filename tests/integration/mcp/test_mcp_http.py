"""`memfleet mcp --http` (streamable HTTP), driven by the `mcp` SDK's own client
against the real memory API and PostgreSQL: a user's token acts for its user alone; a
service key acts for the user its session was opened for, never another; memory off
stores nothing; no credential, 401; no fact text nor credential in the server's log."""

from __future__ import annotations

from pathlib import Path

import httpx
from pydantic import AnyUrl

from tests.api_server import token
from tests.integration.mcp.conftest import (
    INITIALIZE,
    answer,
    http_session,
    mcp_log,
    new_key,
    raw_post,
)
from worker.client import AsyncMemoryApi
from worker.client.memory_tools import memory_tool_definitions
from worker.mcp.server import KNOWN_FACTS_URI
from worker.store.service_keys import ServiceKeyStore


async def test_a_users_token_over_streamable_http(
    api_url: str, mcp_url: str, keys: ServiceKeyStore, tmp_path: Path,
) -> None:
    key = await new_key(keys, "read", "admin")
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        await api.add_fact("bob", "Bob's door code is 4321")
    ada = {"Authorization": f"Bearer {token('ada')}"}
    async with http_session(mcp_url, ada) as mcp:
        names = [t.name for t in (await mcp.list_tools()).tools]
        assert names == [d["function"]["name"] for d in memory_tool_definitions()]
        saved = answer(await mcp.call_tool("save_memory", {"text": "Keeps bees in Leeds"}))
        fact_id = saved["saved"]["id"]
        assert [f["id"] for f in answer(await mcp.call_tool("list_memory", {}))["facts"]] == [
            fact_id]
        found = answer(await mcp.call_tool("search_memory", {"query": "door code bees"}))
        assert [r["id"] for r in found["results"]] == [fact_id]  # never bob's
        block = (await mcp.read_resource(AnyUrl(KNOWN_FACTS_URI))).contents[0]
        assert "bees" in block.text and "4321" not in block.text  # type: ignore[union-attr]
        assert answer(await mcp.call_tool("forget_memory", {"fact_id": fact_id}))["ok"]
        assert answer(await mcp.call_tool("list_memory", {}))["count"] == 0
    # ada's token cannot be pointed at bob
    refused = raw_post(mcp_url, {**ada, "X-Memfleet-User": "bob"}, INITIALIZE)
    assert refused.status_code == 403
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        assert (await api.facts("bob")).count == 1
    log = mcp_log(tmp_path)
    for secret in ("bees", "4321", token("ada").split(".")[2], key):
        assert secret not in log


async def test_a_service_key_session_acts_for_its_user_alone(
    api_url: str, mcp_url: str, keys: ServiceKeyStore,
) -> None:
    key = await new_key(keys, "read", "admin")
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        await api.add_fact("bob", "Bob's door code is 4321")
    as_ada = {"Authorization": f"Bearer {key}", "X-Memfleet-User": "ada"}
    async with http_session(mcp_url, as_ada) as mcp:
        assert answer(await mcp.call_tool("save_memory", {"text": "Likes tea"}))["ok"]
        texts = [f["text"] for f in answer(await mcp.call_tool("list_memory", {}))["facts"]]
        assert texts == ["Likes tea"]
    # A session opened for ada, then asked to act for bob (same key): not found.
    opened = raw_post(mcp_url, as_ada, INITIALIZE)
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "list_memory", "arguments": {}}}
    for other in ({**as_ada, "X-Memfleet-User": "bob"},
                  {"Authorization": f"Bearer {token('bob')}"},
                  {**as_ada, "X-Memfleet-Agent": "coach"}):
        hijack = raw_post(mcp_url, {**other, "mcp-session-id": session,
                                    "mcp-protocol-version": "2025-06-18"}, call)
        assert hijack.status_code == 404
        assert "4321" not in hijack.text
    # A service key without a user: refused before any session.
    assert raw_post(mcp_url, {"Authorization": f"Bearer {key}"}, INITIALIZE).status_code == 401


async def test_memory_off_saves_nothing_over_http(
    api_url: str, mcp_url: str, keys: ServiceKeyStore,
) -> None:
    key = await new_key(keys, "read", "admin")
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        await api.set_consent("cy", False)
    async with http_session(mcp_url, {"Authorization": f"Bearer {token('cy')}"}) as mcp:
        saved = await mcp.call_tool("save_memory", {"text": "PIN is 1234"})
        assert saved.isError and answer(saved)["error"] == "memory_off"
    async with AsyncMemoryApi(api_url, service_key=key) as api:
        assert (await api.facts("cy", scope="all")).count == 0


async def test_no_credential_is_401(mcp_url: str) -> None:
    for headers in ({}, {"Authorization": "Basic YWRhOng="}, {"Authorization": "Bearer junk"}):
        refused = raw_post(mcp_url, headers, INITIALIZE)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["error"] == "Unauthorized"


async def test_a_request_head_over_16_kib_is_refused_before_any_check(mcp_url: str) -> None:
    """The Guard's bound on a complete head, whatever HTTP parser is installed
    (httptools ignored h11's); a head past h11's 64 KiB is refused unread by the parser."""
    refused = raw_post(mcp_url, {"Authorization": f"Bearer {token('ada')}",
                                 "X-Pad": "x" * 20_000}, INITIALIZE)
    assert refused.status_code == 431, refused.status_code
    # Past h11's bound the parser refuses the head unread: uvicorn answers 400 and
    # closes, and whether that answer or the closed socket reaches the client first
    # depends on how much of the 1 MB the client had written; never the app's answer.
    try:
        huge = raw_post(mcp_url, {"Authorization": f"Bearer {token('ada')}",
                                  "X-Pad": "x" * 1_000_000}, INITIALIZE)
    except httpx.TransportError:
        pass
    else:
        assert huge.status_code == 400, f"a 1 MB head was answered {huge.status_code}"
        assert "Refused" not in huge.text and "Unauthorized" not in huge.text
    assert refused.json() == {"error": "Refused",
                              "detail": "the request's headers are over 16384 bytes"}


async def test_a_body_over_the_cap_is_413(mcp_url: str) -> None:
    big = {**INITIALIZE, "params": {**INITIALIZE["params"], "pad": "x" * 300_000}}
    refused = raw_post(mcp_url, {"Authorization": f"Bearer {token('ada')}"}, big)
    assert refused.status_code == 413
