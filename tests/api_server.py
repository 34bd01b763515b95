"""The memory API as a real server for tests: uvicorn on a free loopback port.

``running_api`` runs the server in a thread with its own event loop (as it would
in its own process), so the test talks to it over real HTTP; ``api_process``
runs ``memfleet api`` itself, as deployed, its output in a file. Either serves
the product's app (worker.api.app) unless the settings ask for the chat stand-in,
then api_stub.chat_app's (the same app with the stand-in plugged in).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from pydantic import SecretStr

from api_stub import chat_app
from tests.helpers import worker_env
from worker.api import app as memory_api
from worker.api.auth import AuthConfig, issue_token
from worker.api.serve import NoDelayHttpProtocol
from worker.api.settings import ApiSettings
from worker.config import Settings
from worker.store.service_keys import ServiceKeyStore

SECRET = "memfleet-test-secret-0123456789abcdef"  # noqa: S105 - a throwaway test key
START_TIMEOUT_S = 20.0
PROCESS_START_TIMEOUT_S = 60.0  # a process imports everything and checks the schema
ROOT = Path(__file__).resolve().parents[1]


def api_settings(settings: Settings, *, chat_standin: bool = False, **own: Any) -> ApiSettings:
    """The API's settings on the fleet's ``settings``: the test key; the chat stand-in
    mounted only when asked, as in production (a test that chats says so); ``own``:
    more of the API's own settings. Validated as the API process validates its own,
    without reading the environment (as ``settings`` were made by the test)."""
    return ApiSettings.model_validate({**dict(settings), "jwt_secret": SecretStr(SECRET),
                                       "chat_standin": chat_standin, **own})


def token(user_id: str, *, ttl_s: float = 600, secret: str = SECRET) -> str:
    return issue_token(AuthConfig(secret), user_id, ttl_s=ttl_s)


def bearer(user_id: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(user_id)}"}


@contextlib.asynccontextmanager
async def running_api(settings: ApiSettings) -> AsyncIterator[str]:
    """Serve the app (with the chat stand-in if ``settings`` ask); yield its base URL;
    stop it on exit."""
    app = (chat_app if settings.chat_standin else memory_api).create_app(settings)
    # The protocol worker.api.serve runs: its shutdown ends open event streams.
    async with serving_in_thread(lambda _port: app, "the memory API",
                                 http=NoDelayHttpProtocol) as url:
        yield url


@contextlib.asynccontextmanager
async def serving_in_thread(make_app: Callable[[int], Any], what: str,
                            **config: Any) -> AsyncIterator[str]:
    """Serve the ASGI app ``make_app(port)`` makes with uvicorn in a thread of its own (its
    own event loop, as in its own process) on a loopback port the kernel picks; yield its
    base URL; stop it on exit. ``config``: more of uvicorn's Config (its HTTP protocol)."""
    # proto IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only
    # when the listening socket says TCP, and without it every response waits ~40 ms
    # (Nagle against the client's delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # the kernel picks the port: no race with other tests
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(port), log_level="warning",
                                           lifespan="on", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 15)
        sock.close()


async def new_key(keys: ServiceKeyStore, *scopes: str) -> str:
    """A fresh service key with these scopes, as ``memfleet keys create`` prints it."""
    _, key = await keys.create(f"chat server ({','.join(scopes)})", scopes)
    return key


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def api_command(env: dict[str, str]) -> list[str]:
    """`memfleet api`, or the chat stand-in's entry when MEMFLEET_CHAT_STANDIN is on."""
    if env.get("MEMFLEET_CHAT_STANDIN", "").lower() in ("1", "true", "yes", "on"):
        return [sys.executable, "-m", "api_stub.chat_app"]
    return [sys.executable, "-m", "worker.cli", "api"]


def spawn_api(
    settings: Settings, port: int, log: Path, extra: dict[str, str], *,
    log_level: str = "warning",
) -> subprocess.Popen[bytes]:
    env = worker_env(settings, jwt_secret=SECRET, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with log.open("wb") as out:
        return subprocess.Popen(
            [*api_command(env), "--port", str(port), "--log-level", log_level], env=env,
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)


def log_tail(log: Path) -> str:
    return log.read_text("utf-8", "replace")[-3000:]


@contextlib.asynccontextmanager
async def api_process(
    settings: Settings, log: Path, *, log_level: str = "warning", **extra: str
) -> AsyncIterator[str]:
    """``memfleet api`` on a free port, with MEMFLEET_* from ``settings``
    and ``extra``; its output in ``log``; SIGTERM on exit (SIGKILL 20 s later)."""
    port = free_port()
    proc = spawn_api(settings, port, log, extra, log_level=log_level)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PROCESS_START_TIMEOUT_S
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            while True:
                assert proc.poll() is None, log_tail(log)
                assert time.monotonic() < deadline, "the API process did not start"
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            await asyncio.to_thread(proc.wait, 20)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait, 20)
