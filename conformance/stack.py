"""The servers one conformance run drives an adapter against, all its own and thrown
away after: an embedded Redis and PostgreSQL (migrated), the OpenAI-compatible LLM
stub, one real `memfleet worker` process; for the HTTP transport also the memory
API as real server processes and a service key with the handover and read scopes.

Two queues share the Redis: the worker serves ``LIVE_QUEUE``; nobody serves
``IDLE_QUEUE``, so what an adapter wrote there stays for the checks to read (a
worker would take it away within a poll).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from worker.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from worker.memory_rules import Limits
from worker.protocol import keys
from worker.store.migrate import migrate
from worker.store.service_keys import ServiceKeyStore

ROOT = Path(__file__).resolve().parent.parent
EMBED_DIM = 256
LIVE_QUEUE = "conformance:live"
IDLE_QUEUE = "conformance:idle"
AWAY = "away"  # the name of the API (HTTP transport) whose Redis is away
FENCE_KEY = "conformance-erase-fence-key-0123456789abcdef"
START_TIMEOUT_S = 30.0
# Small enough that every budget is reached with a few short messages; the worker
# runs with the same (docs/protocol.md: the client's limits must be the fleet's).
LIMITS = Limits(max_message_chars=200, max_messages=40, max_id_chars=32,
                max_message_bytes=300, max_handover_bytes=8_600, max_session_bytes=40_000,
                max_user_sessions=3)


@dataclass
class Stack:
    root: Path
    redis_url: str
    database_url: str
    telemetry_id_key: str
    limits: Limits = LIMITS
    closed_redis_url: str = ""
    api_urls: dict[str, str] = field(default_factory=dict)  # queue name or AWAY -> URL
    service_key: str | None = None

    def limits_json(self) -> dict[str, int]:
        return {name: getattr(self.limits, name) for name in (
            "max_message_chars", "max_messages", "max_id_chars", "max_message_bytes",
            "max_handover_bytes", "max_session_bytes", "max_user_sessions")}

    def env(self, queue_name: str, **extra: str) -> dict[str, str]:
        """MEMFLEET_* settings of a worker or API process of this stack."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        settings = {
            "DATABASE_URL": self.database_url, "REDIS_URL": self.redis_url,
            "EMBED_DIM": str(EMBED_DIM), "HOME_DIR": str(self.root / "home"),
            "ERASE_FENCE_KEY": FENCE_KEY, "QUEUE_NAME": queue_name,
            "TELEMETRY_ID_KEY": self.telemetry_id_key, "LOCK_TTL_S": "5",
            "POLL_DELAY_S": "0.05", "BUSY_DEFER_S": "0.1", "JOB_TIMEOUT_S": "30",
            **{k.upper(): str(v) for k, v in self.limits_json().items()}, **extra,
        }
        env.update({f"MEMFLEET_{k}": v for k, v in settings.items()})
        return env


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _log_tail(log: Path) -> str:
    text = log.read_text("utf-8", "replace") if log.exists() else ""
    return " | ".join(text.strip().splitlines()[-5:])


async def _wait_for_worker(stack: Stack, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until the worker's first heartbeat is in the queue's workers hash."""
    redis = Redis.from_url(stack.redis_url)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not await redis.hlen(keys.workers_key(LIVE_QUEUE)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the memfleet worker did not start: {_log_tail(log)}")
            await asyncio.sleep(0.1)
    finally:
        await redis.aclose()


async def _wait_for_api(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    host, port = url.removeprefix("http://").split(":")
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection(host, int(port))
            writer.close()
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the memory API did not start: {_log_tail(log)}")
        await asyncio.sleep(0.1)


async def _service_key(database_url: str) -> str:
    store = await ServiceKeyStore.connect(database_url)
    try:
        _, key = await store.create("conformance suite", ("handover", "read"))
        return key
    finally:
        await store.aclose()


@contextlib.asynccontextmanager
async def running_stack(*, http: bool = False) -> AsyncIterator[Stack]:
    """Start everything; yield the Stack; stop everything and delete its files."""
    root = Path(tempfile.mkdtemp(prefix="memfleet-conformance-"))
    postgres = EmbeddedPostgres(root / "postgres", durable=False)
    redis = EmbeddedRedis(root / "redis")
    away_redis = EmbeddedRedis(root / "redis-away")
    stub = StubServer(dim=EMBED_DIM)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        database_url, redis_url = await asyncio.gather(
            asyncio.to_thread(postgres.start), asyncio.to_thread(redis.start))
        await migrate(database_url, embed_dim=EMBED_DIM)
        stub.start()
        stack = Stack(root, redis_url, database_url, secrets.token_hex(16),
                      closed_redis_url=f"redis://127.0.0.1:{free_port()}/0")
        (root / "home").mkdir()
        model = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": stub.v1,
                 "EMBED_PROVIDER": "openai", "EMBED_BASE_URL": stub.v1}
        log = root / "worker.log"
        procs.append(_spawn([sys.executable, "-m", "worker.cli", "worker", "--log-level",
                             "WARNING"], stack.env(LIVE_QUEUE, **model), log))
        waits = [_wait_for_worker(stack, procs[-1], log)]
        if http:
            stack.service_key = await _service_key(database_url)
            # One API a queue, and one whose Redis goes away once it has started (an API
            # does not start without its Redis).
            away_url = await asyncio.to_thread(away_redis.start)
            apis = {LIVE_QUEUE: (LIVE_QUEUE, redis_url), IDLE_QUEUE: (IDLE_QUEUE, redis_url),
                    AWAY: (LIVE_QUEUE, away_url)}
            for name, (queue, redis_at) in apis.items():
                port, log = free_port(), root / f"api-{len(procs)}.log"
                procs.append(_spawn(
                    [sys.executable, "-m", "worker.cli", "api", "--port", str(port),
                     "--log-level", "warning"],
                    stack.env(queue, REDIS_URL=redis_at, JWT_SECRET=secrets.token_hex(32)),
                    log))
                stack.api_urls[name] = f"http://127.0.0.1:{port}"
                waits.append(_wait_for_api(stack.api_urls[name], procs[-1], log))
        await asyncio.gather(*waits)
        if http:
            await asyncio.to_thread(away_redis.stop)
        yield stack
    finally:
        for proc in procs:
            await asyncio.to_thread(_stop, proc)
        stub.stop()
        for server in (redis, away_redis, postgres):
            with contextlib.suppress(Exception):
                await asyncio.to_thread(server.stop)
            if server.is_running():  # a stop that failed: leave no daemon behind
                with contextlib.suppress(Exception):
                    server.kill()
        shutil.rmtree(root, ignore_errors=True)
