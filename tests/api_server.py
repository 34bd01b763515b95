"""The memory API as a real server for tests: uvicorn on a free loopback port.

The server runs in a thread with its own event loop (as it would in its own
process), so the test talks to it over real HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator

import uvicorn
from pydantic import SecretStr

from api_stub.app import create_app
from api_stub.auth import AuthConfig, issue_token
from worker.config import Settings

SECRET = "memfleet-test-secret-0123456789abcdef"  # noqa: S105 - a throwaway test key
START_TIMEOUT_S = 20.0


def api_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"jwt_secret": SecretStr(SECRET)})


def token(user_id: str, *, ttl_s: float = 600, secret: str = SECRET) -> str:
    return issue_token(AuthConfig(secret), user_id, ttl_s=ttl_s)


def bearer(user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(user_id)}"}


@contextlib.asynccontextmanager
async def running_api(settings: Settings) -> AsyncIterator[str]:
    """Serve create_app(settings); yield its base URL; stop it on exit."""
    app = create_app(settings)
    # proto IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only
    # when the listening socket says TCP, and without it every response waits ~40 ms
    # (Nagle against the client's delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # the kernel picks the port: no race with other tests
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the memory API did not start")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 15)
        sock.close()
