"""worker.client: the chat server's surface, fixed here, and light.

Its ``__all__`` is exactly the list below (a change to it is a change of what chat
servers may rely on: make it on purpose, here and in docs/handover.md), every
name resolves, and importing it in a fresh interpreter loads nothing of ARQ, the
fleet, the pipeline, the store, the providers, asyncpg or openai.
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
    "CommitEvent",
    "Enqueued",
    "HandoverBacklogFull",
    "HandoverState",
    "HandoverTooLarge",
    "HandoverUnavailable",
    "InvalidHandover",
    "Limits",
    "SessionBytesFull",
    "ShardedRedis",
    "SignatureInvalid",
    "UserSessionsFull",
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


def test_the_surface_is_fixed() -> None:
    assert worker.client.__all__ == SURFACE
    assert sorted(SURFACE) == SURFACE


def test_every_name_resolves() -> None:
    for name in SURFACE:
        assert getattr(worker.client, name) is not None, name


def test_importing_the_client_loads_no_fleet_pipeline_store_or_provider() -> None:
    probe = ("import json, sys, worker.client; "
             "print(json.dumps(sorted(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env=env, cwd=ROOT).stdout
    loaded = json.loads(out)
    assert "worker.client.handover" in loaded  # the probe saw the client itself
    heavy = [m for m in loaded
             if any(m == root or m.startswith(root + ".") for root in NEVER_LOADED)]
    assert heavy == []


def test_the_guide_imports_from_the_surface_only() -> None:
    guide = (ROOT / "docs" / "handover.md").read_text("utf-8")
    assert "from worker.client import" in guide
    assert "worker.client.handover" not in guide
