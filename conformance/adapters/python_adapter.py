"""The Python client (worker.client) behind the conformance adapter protocol: one JSON
request a line on stdin, one JSON reply a line on stdout (docs/conformance.md).

    python -m conformance.adapters.python_adapter

It speaks the Redis transport; ``configure`` with ``"transport": "http"`` is
answered Unsupported (the Python chat server's client is the Redis one).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from redis.asyncio import Redis

from worker.client import (
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    InvalidHandover,
    Limits,
    SessionBytesFull,
    UserSessionsFull,
    memory_events,
    memory_status,
    schedule_memory_persistence,
    session_tag,
    wait_for_memory,
)

# Most specific first: HandoverTooLarge is an InvalidHandover, SessionBytesFull a
# HandoverBacklogFull, both of those and UserSessionsFull a HandoverUnavailable.
ERROR_KINDS: tuple[tuple[type[Exception], str], ...] = (
    (HandoverTooLarge, "HandoverTooLarge"), (InvalidHandover, "InvalidHandover"),
    (SessionBytesFull, "SessionBytesFull"), (HandoverBacklogFull, "HandoverBacklogFull"),
    (UserSessionsFull, "UserSessionsFull"), (HandoverUnavailable, "HandoverUnavailable"),
)


class Unsupported(Exception):
    pass


class BadRequest(Exception):
    pass


class PythonAdapter:
    def __init__(self) -> None:
        self.redis: Redis | None = None
        self.queue_name = ""
        self.telemetry_id_key: str | None = None
        self.limits = Limits()

    def _redis(self) -> Redis:
        if self.redis is None:
            raise BadRequest("configure first")
        return self.redis

    async def configure(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["transport"] != "redis":
            raise Unsupported(f"the Python client speaks redis, not {req['transport']!r}")
        self.redis = Redis.from_url(req["redis_url"])
        self.queue_name = req["queue_name"]
        self.telemetry_id_key = req.get("telemetry_id_key")
        self.limits = Limits(**req["limits"])
        return {}

    async def handover(self, req: dict[str, Any]) -> dict[str, Any]:
        enqueued = await schedule_memory_persistence(
            self._redis(), req["session_id"], req["user_id"], req["messages"],
            limits=self.limits, queue_name=self.queue_name,
            telemetry_id_key=self.telemetry_id_key, agent_id=req.get("agent_id"),
            listed_at_us=req.get("listed_at_us"))
        return {"handover_id": enqueued.handover_id, "job_id": enqueued.job_id,
                "kept_older": enqueued.kept_older}

    async def status(self, req: dict[str, Any]) -> dict[str, Any]:
        state = await memory_status(self._redis(), req["session_id"], req["user_id"])
        return {"latest": state.latest, "finished": state.finished,
                "older_lists": state.older_lists}

    async def wait(self, req: dict[str, Any]) -> dict[str, Any]:
        covered = await wait_for_memory(self._redis(), req["session_id"], req["user_id"],
                                        req["handover_id"], timeout_s=req["timeout_s"])
        return {"covered": covered}

    async def events(self, req: dict[str, Any]) -> dict[str, Any]:
        found = await memory_events(self._redis(), after=req["after"], count=req["count"],
                                    block_ms=req.get("block_ms"), queue_name=self.queue_name)
        return {"events": [{"id": e.id, "session": e.session, "handover": e.handover,
                            "older_lists": e.older_lists, "outcome": e.outcome,
                            "added": e.added, "updated": e.updated, "deleted": e.deleted,
                            "at": e.at_ms} for e in found]}

    async def session_tag(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.telemetry_id_key is None:
            return {"tag": None}
        return {"tag": session_tag(req["session_id"], req["user_id"], self.telemetry_id_key)}

    async def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request (without its id)."""
        op = req.get("op")
        handler = {"configure": self.configure, "handover": self.handover,
                   "status": self.status, "wait": self.wait, "events": self.events,
                   "session_tag": self.session_tag}.get(op)  # type: ignore[arg-type]
        try:
            if handler is None:
                raise BadRequest(f"unknown op {op!r}")
            return {"ok": True, "result": await handler(req)}
        except Unsupported as exc:
            return _error("Unsupported", str(exc))
        except (BadRequest, KeyError, TypeError) as exc:
            return _error("BadRequest", f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            for cls, kind in ERROR_KINDS:
                if isinstance(exc, cls):
                    return _error(kind, str(exc))
            raise


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": kind, "message": message}}


async def serve(adapter: PythonAdapter) -> int:
    """Answer stdin's requests in order until ``shutdown`` or end of input."""
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.buffer.readline):
        try:
            req = json.loads(line)
            if not isinstance(req, dict) or not isinstance(req.get("id"), int):
                raise ValueError("a request is an object with an integer id")
        except ValueError as exc:
            print(f"adapter: unreadable request: {exc}", file=sys.stderr)
            continue
        if req.get("op") == "shutdown":
            _reply({"id": req["id"], "ok": True, "result": {}})
            break
        _reply({"id": req["id"], **await adapter.answer(req)})
    if adapter.redis is not None:
        await adapter.redis.aclose()
    return 0


def _reply(reply: dict[str, Any]) -> None:
    # ensure_ascii: a lone surrogate in an echoed message would not encode as UTF-8.
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(asyncio.run(serve(PythonAdapter())))
