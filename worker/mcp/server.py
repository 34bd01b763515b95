"""The MCP server of `memfleet mcp` (docs/mcp.md), on the official `mcp` SDK's low-level
server: the memory tools, the known-facts block as a resource and as a prompt.

Nothing of the tools is defined here. Their list is generated from the shared
definitions (worker/client/memory_tools.json, the OpenAI tools format that function
calling uses) and every call runs through the Python executor
(worker.client.memory_tools.AsyncMemoryTools) over the memory API client: the same
validation, limits, consent rules and answers as a model's function call, and the
API's own authentication, scopes and rate limits, since the credential the server
acts with is the caller's.

Which user a request acts for comes from ``principal_of``: over stdio the one named
at start; over streamable HTTP the request's credential (worker.mcp.http). Nothing
here logs a message, a fact, an argument or a credential.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from pydantic import AnyUrl

from worker.client.memory_api_async import AsyncMemoryApi
from worker.client.memory_tools import AsyncMemoryTools, memory_tool_definitions
from worker.errors import AccessDenied, MemfleetError, MemoryApiUnavailable

log = logging.getLogger("memfleet.mcp")

SERVER_NAME = "memfleet"
KNOWN_FACTS_URI = "memory://known-facts"
KNOWN_FACTS_PROMPT = "known_facts"
# Every memory API call the server makes is held to this (the client's own timeout
# bounds each HTTP request; this bounds a tool call's whole run, retries included).
DEFAULT_CALL_TIMEOUT_S = 10.0
# The longest message the prompt takes to pick the facts for (the API's q cap).
MAX_PROMPT_MESSAGE_CHARS = 2_000

INSTRUCTIONS = """Long-term memory of one user (memfleet). Use search_memory before \
answering about the user's past, preferences or people; save_memory only when the user \
asks for something to be remembered; forget_memory when the user asks to forget. The \
resource memory://known-facts is what memory knows about the user, for a system prompt."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts for: the user, the agent (memory scope), and the memory API
    client that carries the caller's credential."""

    user_id: str
    agent_id: str | None
    api: AsyncMemoryApi


def tool_list(definitions: Iterable[dict[str, Any]]) -> list[types.Tool]:
    """MCP's tools from the OpenAI-format definitions: the same names, descriptions and
    JSON schemas."""
    tools = []
    for definition in definitions:
        function = definition["function"]
        tools.append(types.Tool(name=function["name"],
                                description=function.get("description"),
                                inputSchema=function.get("parameters")
                                or {"type": "object", "properties": {}}))
    return tools


def shared_definitions() -> list[dict[str, Any]]:
    """The tools' definitions, as the executor has them (one source for both)."""
    return memory_tool_definitions()


def build_server(principal_of: Callable[[], Principal], *,
                 call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> Server[Any, Any]:
    """The MCP server; ``principal_of`` answers, inside a request's handler, whom that
    request acts for (raising PermissionError when it cannot say)."""
    server: Server[Any, Any] = Server(SERVER_NAME, instructions=INSTRUCTIONS)
    tools = tool_list(shared_definitions())

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return tools

    # The executor validates the arguments itself (as for a model's function call): its
    # answer to a bad call is the one a model gets, not the SDK's jsonschema message.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        principal = principal_of()
        executor = AsyncMemoryTools(principal.api, user_id=principal.user_id,
                                    agent_id=principal.agent_id)
        try:
            async with asyncio.timeout(call_timeout_s):
                answer = await executor.run(name, arguments)
        except TimeoutError:
            log.warning("mcp tool call timed out", extra={"tool": name[:64]})
            answer = json.dumps({"ok": False, "error": "timeout", "message": "the memory "
                                 f"API did not answer within {call_timeout_s:g} s"})
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer)],
                                    isError=_is_error(answer))

    @server.list_resources()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_resources() -> list[types.Resource]:
        return [types.Resource(
            uri=AnyUrl(KNOWN_FACTS_URI), name="known-facts", mimeType="text/plain",
            description="What memory knows about the user, as a block for the system "
                        "prompt (empty when nothing is known or memory is off)")]

    @server.read_resource()  # type: ignore[no-untyped-call, untyped-decorator]
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        if str(uri) != KNOWN_FACTS_URI:
            raise ValueError("unknown resource: memfleet has memory://known-facts")
        block = await _known_facts(principal_of(), None, call_timeout_s)
        return [ReadResourceContents(content=block, mime_type="text/plain")]

    @server.list_prompts()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_prompts() -> list[types.Prompt]:
        return [types.Prompt(
            name=KNOWN_FACTS_PROMPT,
            description="What memory knows about the user, the facts picked for a message "
                        "when one is given: text for the system prompt",
            arguments=[types.PromptArgument(
                name="message", required=False,
                description="the user's message, to pick the facts most related to it")])]

    @server.get_prompt()  # type: ignore[no-untyped-call, untyped-decorator]
    async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != KNOWN_FACTS_PROMPT:
            raise ValueError("unknown prompt: memfleet has known_facts")
        message = (arguments or {}).get("message") or None
        if message is not None and len(message) > MAX_PROMPT_MESSAGE_CHARS:
            raise ValueError(f"message is longer than {MAX_PROMPT_MESSAGE_CHARS} characters")
        block = await _known_facts(principal_of(), message, call_timeout_s)
        return types.GetPromptResult(
            description="what memory knows about the user",
            messages=[types.PromptMessage(role="user",
                                          content=types.TextContent(type="text", text=block))])

    return server


async def _known_facts(principal: Principal, message: str | None, timeout_s: float) -> str:
    async with asyncio.timeout(timeout_s):
        known = await principal.api.known_facts(principal.user_id, message,
                                                agent_id=principal.agent_id)
    return known.block


def _is_error(answer: str) -> bool:
    """Whether the executor's answer reports a failure (``"ok": false``)."""
    try:
        value = json.loads(answer)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("ok") is False


async def serve_stdio(api: AsyncMemoryApi, user_id: str, agent_id: str | None, *,
                      call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> None:
    """The server over stdin and stdout, for one user named at start, until the client
    closes stdin. stdout is the protocol's: everything else goes to stderr.

    The credential is checked first, with the read every HTTP session opens with
    (``GET /users/{u}/consent``): one the API refuses for this user, or an API that
    does not answer, ends the command at once (MemfleetError: one line, exit 2)
    rather than a server whose every call fails."""
    import anyio
    from mcp.server.stdio import stdio_server

    try:
        await api.consent(user_id)
    except (AccessDenied, MemoryApiUnavailable) as refused:
        await api.aclose()
        raise MemfleetError(f"`memfleet mcp` cannot act for --user: {refused}") from None
    principal = Principal(user_id=user_id, agent_id=agent_id, api=api)
    server = build_server(lambda: principal, call_timeout_s=call_timeout_s)
    # Copies of the descriptors: the SDK's wrappers close what they wrap when they go,
    # and sys.stdout must outlive them (the command flushes it on its way out).
    stdin = anyio.wrap_file(io.TextIOWrapper(os.fdopen(os.dup(sys.stdin.fileno()), "rb"),
                                             encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(os.dup(sys.stdout.fileno()), "wb"),
                                              encoding="utf-8"))
    try:
        async with stdio_server(stdin, stdout) as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await api.aclose()
