"""bench.lib.raw_http against a real HTTP server (uvicorn with httptools, as the memory API
runs): requests over one keep-alive connection, what it reads of the answers, and
what it refuses to read."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from bench.lib.raw_http import RawConnection, RawHttpError

Scope = dict[str, Any]
KEEP_ALIVE_S = 1  # the server closes a connection idle this long


async def app(scope: Scope, receive: Any, send: Any) -> None:
    """Echoes what it got as JSON; /chunked answers without a Content-Length, /close
    closes the connection."""
    if scope["type"] != "http":
        return
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    answer = json.dumps({"method": scope["method"], "path": scope["path"],
                         "auth": headers.get("authorization"),
                         "type": headers.get("content-type"), "body": body.decode(),
                         "client_port": scope["client"][1]}).encode()
    out = [(b"content-type", b"application/json"), (b"x-twice", b"1"), (b"x-twice", b"2")]
    if scope["path"] != "/chunked":
        out.append((b"content-length", str(len(answer)).encode()))
    if scope["path"] == "/close":
        out.append((b"connection", b"close"))
    status = 404 if scope["path"] == "/missing" else 200
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture
async def server_url() -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, http="httptools", log_level="warning", access_log=False,
                            lifespan="off", timeout_keep_alive=KEEP_ALIVE_S)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    for _ in range(1000):  # 10 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the test server did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


async def test_requests_share_one_keep_alive_connection(server_url: str) -> None:
    conn = RawConnection(server_url, {"Authorization": "Bearer mfk_x"})
    try:
        first = await conn.request("POST", "/users/u/sessions/s/handover", b'{"a": 1}')
        second = await conn.request("GET", "/healthz")
    finally:
        await conn.aclose()
    assert first.status == 200 and second.status == 200
    sent = json.loads(first.body)
    assert sent == {"method": "POST", "path": "/users/u/sessions/s/handover",
                    "auth": "Bearer mfk_x", "type": "application/json", "body": '{"a": 1}',
                    "client_port": sent["client_port"]}
    assert json.loads(second.body)["method"] == "GET"
    assert json.loads(second.body)["body"] == "" and json.loads(second.body)["type"] is None
    # The same connection: the server saw the same client port both times.
    assert json.loads(second.body)["client_port"] == sent["client_port"]
    assert first.headers["content-type"] == "application/json"
    assert first.headers["x-twice"] == "2"  # the last value of a repeated name


async def test_a_status_other_than_200_is_read_and_the_connection_kept(
    server_url: str,
) -> None:
    conn = RawConnection(server_url)
    try:
        missing = await conn.request("GET", "/missing")
        after = await conn.request("GET", "/x")
    finally:
        await conn.aclose()
    assert missing.status == 404 and after.status == 200
    assert json.loads(missing.body)["client_port"] == json.loads(after.body)["client_port"]


async def test_connection_close_opens_a_new_connection_next_time(server_url: str) -> None:
    conn = RawConnection(server_url)
    try:
        closing = await conn.request("GET", "/close")
        after = await conn.request("GET", "/x")
    finally:
        await conn.aclose()
    assert closing.status == after.status == 200
    assert json.loads(closing.body)["client_port"] != json.loads(after.body)["client_port"]


async def test_a_connection_the_server_closed_while_idle_is_opened_again(
    server_url: str,
) -> None:
    conn = RawConnection(server_url)
    try:
        before = await conn.request("POST", "/x", b"{}")
        await asyncio.sleep(KEEP_ALIVE_S + 0.5)
        after = await conn.request("POST", "/x", b"{}")
    finally:
        await conn.aclose()
    assert before.status == after.status == 200
    assert json.loads(before.body)["client_port"] != json.loads(after.body)["client_port"]


async def test_a_chunked_body_is_refused_and_the_connection_dropped(server_url: str) -> None:
    conn = RawConnection(server_url)
    try:
        with pytest.raises(RawHttpError, match="chunked"):
            await conn.request("GET", "/chunked")
        after = await conn.request("GET", "/x")  # a fresh connection
    finally:
        await conn.aclose()
    assert after.status == 200


async def test_no_server_is_a_raw_http_error_or_os_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
    conn = RawConnection(f"http://127.0.0.1:{port}")
    with pytest.raises(OSError):
        await conn.request("GET", "/x")


def test_only_plain_http_urls() -> None:
    with pytest.raises(ValueError, match="only http"):
        RawConnection("https://example.org")
