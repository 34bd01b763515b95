"""No credential of a webhook receiver's or a model endpoint's URL in any log line: the
webhook sender and a worker calling the openai providers, each run as the CLI at its
default log level against URLs holding user:password@, a path token and a query token;
everything they write (stdlib logging, structlog, stdout, stderr) is searched."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.routing import Mount

from api_stub import llm_stub
from api_stub.llm_faults import Fault
from api_stub.llm_stub import CHAT_PATH, EMBED_PATH, StubServer
from tests.helpers import drain, stop_process, user_msg, worker_env
from tests.webhook_receiver import Receiver
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.webhook import GROUP
from worker.protocol import keys

PASSWORD = "PASSWORD9xq"  # noqa: S105 - a marker, searched for in the logs
PATH_TOKEN = "PATHTOKEN7f3a"  # noqa: S105
QUERY_TOKEN = "QUERYTOKEN5b1c"  # noqa: S105
WEBHOOK_SECRET = "WEBHOOKSECRET0123456789"  # noqa: S105
API_KEY = "sk-APIKEY0123456789abcdef"
MARKERS = (PASSWORD, PATH_TOKEN, QUERY_TOKEN, WEBHOOK_SECRET, API_KEY, "alice")


def assert_no_secret(output: str) -> None:
    for marker in MARKERS:
        assert marker not in output, f"{marker} in the logs"


async def wait_for(check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        await asyncio.sleep(0.1)


def start_sender(settings: Settings, url: str, log_path: Path,
                 http_requests: bool) -> subprocess.Popen[bytes]:
    """`memfleet webhook` at its default log level, stdout and stderr into ``log_path``."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "worker.cli", "webhook", "--url", url, "--from-start"],
            env=worker_env(settings, webhook_secret=WEBHOOK_SECRET,
                           log_http_requests=str(http_requests).lower()),
            stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.parametrize("http_requests", [False, True])
async def test_the_webhook_sender_logs_no_credential_of_its_url(
    settings: Settings, redis: Redis, tmp_path: Path, http_requests: bool,
) -> None:
    """By default httpx's request lines are off; asked for, they come redacted."""
    receiver = Receiver([500, 400])  # one retry, one refusal: the sender's warning lines
    try:
        for user in ("u1", "u2"):
            await schedule_memory_persistence(redis, "chat1", user, [user_msg("I use Zig.")],
                                              queue_name=settings.queue_name)
        await drain(settings)
        port = receiver.server.server_address[1]
        url = f"http://alice:{PASSWORD}@127.0.0.1:{port}/hook/{PATH_TOKEN}?token={QUERY_TOKEN}"
        log_path = tmp_path / "webhook.log"
        sender = start_sender(settings, url, log_path, http_requests)
        events = keys.events_key(settings.queue_name)

        async def all_answered() -> bool:
            if len(receiver.requests) < 3:
                return False
            return int((await redis.xpending(events, GROUP))["pending"]) == 0

        try:
            await wait_for(all_answered, 30)
        finally:
            stop_process(sender)
        assert [p.status for p in receiver.requests] == [500, 400, 200]
        output = log_path.read_text()
        # It did log the receiver, the retry and the refusal, each URL redacted.
        assert f'"receiver": "http://***@127.0.0.1:{port}/hook/***?token=***"' in output
        assert "receiver away" in output and "refused by the receiver" in output
        request_line = f"HTTP Request: POST http://***@127.0.0.1:{port}/hook/***?token=***"
        assert output.count(request_line) == (3 if http_requests else 0), output
        assert ("HTTP Request" in output) == http_requests
        assert_no_secret(output)
    finally:
        receiver.close()


@pytest.fixture
def tokened_stub(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    """The OpenAI-compatible stub under /tenant/<token>/v1, as some gateways address it."""
    plain = llm_stub.create_app

    def under_token(state: llm_stub.StubState | None = None) -> Starlette:
        return Starlette(routes=[Mount(f"/tenant/{PATH_TOKEN}", app=plain(state))])

    monkeypatch.setattr(llm_stub, "create_app", under_token)
    with StubServer(dim=settings.embed_dim) as server:
        yield server


def run_worker(settings: Settings, base_url: str) -> subprocess.CompletedProcess[str]:
    """`memfleet worker --burst` at its default log level, both providers on ``base_url``."""
    env = worker_env(settings, llm_provider="openai", llm_base_url=base_url,
                     llm_api_key=API_KEY, embed_provider="openai", embed_base_url=base_url,
                     embed_api_key=API_KEY)
    return subprocess.run([sys.executable, "-m", "worker.cli", "worker", "--burst"], env=env,
                          capture_output=True, text=True, timeout=120)


async def test_a_worker_calling_the_model_logs_no_credential_of_its_url(
    settings: Settings, redis: Redis, tokened_stub: StubServer,
) -> None:
    """A base URL with a path token (the openai client cannot keep a query in its base
    URL: it appends the path after it). A first 500 makes the provider's retry run too."""
    await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name)
    tokened_stub.state.queue([Fault.parse({"mode": "500", "path": CHAT_PATH})])
    done = await asyncio.to_thread(run_worker, settings,
                                   f"{tokened_stub.url}/tenant/{PATH_TOKEN}/v1")
    assert done.returncode == 0, done.stderr[-2000:]
    paths = [r["path"] for r in tokened_stub.state.recorded()]
    assert paths.count(CHAT_PATH) >= 2 and EMBED_PATH in paths, done.stderr  # calls made
    assert '"job finished"' in done.stderr  # and the worker did log
    assert_no_secret(done.stdout + done.stderr)


async def test_a_worker_whose_model_url_holds_a_password_refuses_to_boot_without_quoting_it(
    settings: Settings, redis: Redis, tokened_stub: StubServer,
) -> None:
    """user:password@ in the base URL (aiohttp would refuse it beside the API key's
    Authorization header, failing every job): the worker refuses to start, in one
    line naming the variable and no part of the URL."""
    await schedule_memory_persistence(redis, "chat1", "u1", [user_msg("I use Zig.")],
                                      queue_name=settings.queue_name)
    base = tokened_stub.url.replace("http://", f"http://alice:{PASSWORD}@")
    done = await asyncio.to_thread(run_worker, settings,
                                   f"{base}/tenant/{PATH_TOKEN}/v1?token={QUERY_TOKEN}")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "MEMFLEET_LLM_BASE_URL must not carry credentials" in done.stderr
    assert tokened_stub.state.recorded() == []  # no call was made
    assert_no_secret(done.stdout + done.stderr)
