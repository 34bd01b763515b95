"""worker.client: the chat server's surface, fixed here, and light.

Its ``__all__`` is exactly the list below (a change to it is a change of what chat
servers may rely on: make it on purpose, here and in docs/handover.md), every
name resolves, and importing it in a fresh interpreter loads nothing of ARQ, the
fleet, the pipeline, the store, the providers, asyncpg or openai. The memory API's
client (MemoryApi, AsyncMemoryApi, docs/python_client.md) loads on first use, and
then nothing of the API server (worker.api, FastAPI, Starlette, uvicorn)
either; its answers' types (worker.client.memory_api_models) are fixed too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import worker.client

ROOT = Path(__file__).resolve().parents[3]
SURFACE = [
    "AccessDenied",
    "AsyncMemoryApi",
    "AsyncMemoryTools",
    "CommitEvent",
    "Enqueued",
    "HandoverBacklogFull",
    "HandoverState",
    "HandoverTooLarge",
    "HandoverUnavailable",
    "InvalidHandover",
    "InvalidRequest",
    "Limits",
    "LongPollRefused",
    "LongPollsFull",
    "MemoryApi",
    "MemoryApiError",
    "MemoryApiUnavailable",
    "MemoryOff",
    "MemoryTools",
    "NotFound",
    "RateLimited",
    "SessionBytesFull",
    "ShardedRedis",
    "SignatureInvalid",
    "TooManyLongPolls",
    "UserSessionsFull",
    "WriteConflict",
    "memory_events",
    "memory_status",
    "redis_clock",
    "schedule_memory_persistence",
    "session_tag",
    "verify_webhook",
    "wait_for_memory",
]
NEVER_LOADED = ("arq", "worker.fleet", "worker.pipeline", "worker.store", "worker.providers",
                "asyncpg", "openai")
# Nor, with the memory API's client loaded, anything of the API server (PyJWT is not
# in the list: redis-py imports it for its own token auth when it is installed).
NEVER_LOADED_OVER_HTTP = (*NEVER_LOADED, "worker.api", "worker.ops", "fastapi", "starlette",
                          "uvicorn")
MODELS = ["ActiveFacts", "CategoryGroup", "Chain", "Consent", "Erased", "Export", "Fact",
          "HandedOver", "HeldAnswer", "HeldProposal", "KnownFacts", "ProposalState",
          "ReadScope", "Readiness", "SearchHit", "SearchResults", "SessionStatus",
          "WaitOutcome"]


def test_the_surface_is_fixed() -> None:
    assert worker.client.__all__ == SURFACE
    assert sorted(SURFACE) == SURFACE


def test_every_name_resolves() -> None:
    for name in SURFACE:
        assert getattr(worker.client, name) is not None, name


def loaded_by(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    probe = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env=env, cwd=ROOT).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def within(loaded: list[str], roots: tuple[str, ...]) -> list[str]:
    return [m for m in loaded if any(m == root or m.startswith(root + ".") for root in roots)]


def test_importing_the_client_loads_no_fleet_pipeline_store_or_provider() -> None:
    loaded = loaded_by("import worker.client")
    assert "worker.client.handover" in loaded  # the probe saw the client itself
    assert within(loaded, NEVER_LOADED) == []
    # The memory API's client waits for its first use: a Redis-only chat server
    # imports no httpx for it.
    assert within(loaded, ("httpx", "worker.client.memory_api")) == []


def test_the_memory_api_client_loads_nothing_of_the_api_server() -> None:
    loaded = loaded_by("from worker.client import AsyncMemoryApi, MemoryApi")
    assert {"worker.client.memory_api", "worker.client.memory_api_async", "httpx"} <= set(loaded)
    assert within(loaded, NEVER_LOADED_OVER_HTTP) == []


def test_the_memory_api_answers_types_are_fixed() -> None:
    from worker.client import memory_api_models

    assert memory_api_models.__all__ == MODELS
    for name in MODELS:
        assert getattr(memory_api_models, name) is not None, name


def test_the_guide_imports_from_the_surface_only() -> None:
    for name in ("handover.md", "python_client.md"):
        guide = (ROOT / "docs" / name).read_text("utf-8")
        assert "from worker.client import" in guide, name
        assert "worker.client.handover" not in guide, name
        assert "worker.client.memory_api import" not in guide, name
