"""Running the TypeScript client's node tests from pytest (clients/typescript/, built by
``make typescript``), with the servers they need: real Redis and PostgreSQL
(tests/conftest.py), the LLM stub, a real ``memfleet worker`` process, the memory
API on a loopback port, service keys and its token key; and two Redis URLs that
fail: a closed port and one that accepts connections and never answers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from api_stub.llm_stub import StubServer
from tests.api_server import SECRET, api_settings, running_api
from tests.helpers import WorkerProcesses, worker_env
from tests.openai_stub import openai_settings
from worker.config import Settings
from worker.store.service_keys import ServiceKeyStore

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "clients" / "typescript"
DIST = PACKAGE / "dist"
BUILT_STAMP = DIST / ".memfleet-stamp"
TELEMETRY_ID_KEY = "ts-suite-telemetry-key"


def require_build() -> None:
    """The compiled client is there and newer than every source: else the node tests
    would test something else than the tree."""
    sources = [*PACKAGE.glob("src/**/*.ts"), *PACKAGE.glob("scripts/*.mjs"),
               PACKAGE / "package-lock.json", PACKAGE / "tsconfig.json",
               PACKAGE / "tsconfig.cjs.json",
               # embedded into the build (scripts/embed-lua.mjs)
               *(ROOT / "worker" / "protocol" / "lua" / name
                 for name in ("payload_messages.lua", "enqueue.lua"))]
    newest = max(p.stat().st_mtime for p in sources)
    if not BUILT_STAMP.exists() or BUILT_STAMP.stat().st_mtime < newest:
        pytest.fail("clients/typescript/dist is missing or older than clients/typescript/src:"
                    " run `make typescript`")


def run_node(args: list[str], env: dict[str, str] | None = None,
             timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    """node with ``args`` from the repository root; fails the test with node's output
    unless it exits 0."""
    done = subprocess.run(["node", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if done.returncode != 0:
        pytest.fail(f"node {' '.join(args)} exited {done.returncode}\n"
                    f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}", pytrace=False)
    return done


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a Redis that hangs)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def closed_port() -> int:
    """A loopback port nothing listens on (just released by the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _key(database_url: str, *scopes: str) -> str:
    store = await ServiceKeyStore.connect(database_url)
    try:
        _, key = await store.create(f"typescript tests ({','.join(scopes)})", scopes)
        return key
    finally:
        await store.aclose()


@contextlib.asynccontextmanager
async def node_fleet(settings: Settings, stub: StubServer, log_dir: Path, *,
                     worker_own: dict[str, str] | None = None,
                     **api_own: Any) -> AsyncIterator[dict[str, str]]:
    """A worker and the API on ``settings`` with the LLM stub (the worker with
    ``worker_own``, settings by their names without MEMFLEET_, and the API with
    ``api_own``, its own settings, too), and the environment the node tests read
    (clients/typescript/src/test/integration/env.ts)."""
    fleet = openai_settings(settings, stub).model_copy(
        update={"telemetry_id_key": SecretStr(TELEMETRY_ID_KEY)})
    env = worker_env(fleet, llm_provider="openai", llm_base_url=stub.v1,
                     embed_provider="openai", embed_base_url=stub.v1,
                     telemetry_id_key=TELEMETRY_ID_KEY, queue_name=fleet.queue_name,
                     # The persons' test learns people from conversations (off by default).
                     persons="true", **(worker_own or {}))
    workers = WorkerProcesses(env, log_dir, 1)
    try:
        async with running_api(api_settings(fleet, **api_own)) as api_url:
            with silent_port() as silent:
                yield {
                    **env,
                    "MEMFLEET_TEST_REDIS_URL": fleet.redis_url or "",
                    "MEMFLEET_TEST_QUEUE": fleet.queue_name,
                    "MEMFLEET_TEST_TELEMETRY_ID_KEY": TELEMETRY_ID_KEY,
                    "MEMFLEET_TEST_API_URL": api_url,
                    "MEMFLEET_TEST_SERVICE_KEY": await _key(fleet.database_url or "",
                                                            "handover", "read"),
                    "MEMFLEET_TEST_READ_KEY": await _key(fleet.database_url or "", "read"),
                    "MEMFLEET_TEST_ADMIN_KEY": await _key(fleet.database_url or "",
                                                          "handover", "read", "admin"),
                    # The API's token key, for the tests to mint end users' tokens.
                    "MEMFLEET_TEST_JWT_SECRET": SECRET,
                    "MEMFLEET_TEST_SILENT_REDIS_URL": f"redis://127.0.0.1:{silent}",
                    "MEMFLEET_TEST_CLOSED_REDIS_URL": f"redis://127.0.0.1:{closed_port()}",
                    # The LLM stub itself: a test scripting a model's tool calls.
                    "MEMFLEET_TEST_LLM_STUB_URL": stub.url,
                }
    finally:
        await asyncio.to_thread(workers.stop)
        await asyncio.to_thread(_show_logs, log_dir)


def _show_logs(log_dir: Path) -> None:
    for log in sorted(log_dir.glob("worker-*.log")):
        text = log.read_text("utf-8", "replace").strip()
        if text:
            print(f"--- {log.name}\n{text}")  # shown by pytest when the test fails


def readme_examples() -> dict[str, str]:
    """The client README's runnable examples: each ```js block whose first line is
    ``// <file name>`` (example.mjs, example.cjs), by that name."""
    examples: dict[str, str] = {}
    lines: list[str] | None = None
    for line in (PACKAGE / "README.md").read_text(encoding="utf-8").splitlines():
        if lines is None and line.strip() == "```js":
            lines = []
        elif lines is not None and line.strip() == "```":
            if lines and lines[0].startswith("// "):
                examples[lines[0][3:].strip()] = "\n".join(lines) + "\n"
            lines = None
        elif lines is not None:
            lines.append(line)
    return examples
