"""What the `memfleet mcp` tests share: the real memory API (on the LLM stub's
embedder, as the client tests run it), service keys, and `memfleet mcp` itself as a
subprocess, over stdio or streamable HTTP, driven by the `mcp` SDK's own client."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent

from tests.api_server import (
    new_key,  # noqa: F401 - the tests import it from here
    serving_in_thread,
)
from tests.helpers import stop_process
from tests.integration.client.conftest import api_url, llm  # noqa: F401
from worker.mcp.http import create_app

MEMFLEET = str(Path(sys.executable).with_name("memfleet"))
START_TIMEOUT_S = 30.0
# What the subprocess is given of the test's environment: nothing of memfleet's own.
_KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEPT}
    env.update(extra)
    return env


@contextlib.asynccontextmanager
async def stdio_session(base_url: str, user: str, *, agent: str | None = None,
                        **credential: str) -> AsyncIterator[ClientSession]:
    """`memfleet mcp --user USER` over stdio, the credential in its environment."""
    args = ["mcp", "--user", user, "--api-url", base_url, "--timeout", "20"]
    if agent is not None:
        args += ["--agent", agent]
    params = StdioServerParameters(command=MEMFLEET, args=args, env=clean_env(**credential))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def http_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(url, http_client=http) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def mcp_http_process(base_url: str, tmp_path: Path) -> Iterator[str]:
    """`memfleet mcp --http` on a free loopback port; yields its /mcp URL."""
    port = free_port()
    log = (tmp_path / "mcp-http.log").open("wb")
    process = subprocess.Popen([MEMFLEET, "mcp", "--http", "--port", str(port),
                                "--api-url", base_url, "--timeout", "20",
                                "--log-level", "info"],
                               env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port),
                                                                        timeout=0.5):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("memfleet mcp --http did not start: "
                                   + (tmp_path / "mcp-http.log").read_text()[-2000:])
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)
        log.close()


@contextlib.asynccontextmanager
async def mcp_in_process(base_url: str, *, max_sessions: int) -> AsyncIterator[str]:
    """`memfleet mcp --http`'s app in this process (uvicorn in a thread), at a session
    limit of ``max_sessions``: what a test of the slots needs. Yields its /mcp URL."""
    def make_app(port: int) -> Any:
        return create_app(base_url, port=port, call_timeout_s=20, max_sessions=max_sessions)

    async with serving_in_thread(make_app, "the MCP app") as url:
        yield f"{url}/mcp"


@pytest.fixture
def mcp_url(api_url: str, tmp_path: Path) -> Iterator[str]:  # noqa: F811 - the fixture
    with mcp_http_process(api_url, tmp_path) as url:
        yield url


def answer(result: CallToolResult) -> dict[str, Any]:
    """A tool call's answer: the executor's JSON."""
    content = result.content[0]
    assert isinstance(content, TextContent)
    value: dict[str, Any] = json.loads(content.text)
    return value


def mcp_log(tmp_path: Path) -> str:
    path = tmp_path / "mcp-http.log"
    return path.read_text(errors="replace") if path.exists() else ""


def raw_post(url: str, headers: dict[str, str], body: dict[str, Any]) -> httpx.Response:
    """One JSON-RPC message by hand, for what the SDK's client never sends."""
    return httpx.post(url, json=body, timeout=20, headers={
        "Accept": "application/json, text/event-stream", **headers})


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"}}}
