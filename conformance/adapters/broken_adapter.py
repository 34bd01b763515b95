"""The Python adapter with one deliberate protocol bug, the kind a careless port
makes, for showing that the suite catches it (docs/conformance.md).

    python -m conformance.adapters.broken_adapter [--bug member-order|ascii-escape|no-window]

(or CONFORMANCE_BUG=...). It writes the payload itself, as a port would, instead of
through worker.protocol.payload:

- ``member-order`` (the default): each message as {"content": ..., "role": ...}, the
  order a JavaScript object literal or a struct may give. The worker reads it, but
  the scripts compare lists as text: a list from another client never extends it,
  and every such hand-over is a "replaced history" kept in the backlog.
- ``ascii-escape``: text beyond ASCII written as \\uXXXX escapes (a JSON library's
  default in many languages): the same effect for any non-English conversation.
- ``no-window``: a long session is sent whole instead of as its newest window that
  fits, so it is refused instead of handed over.
- ``one-error-kind``: every refusal of the input reported as InvalidHandover (a port
  with one error class): a caller cannot tell a message to shorten from bad input.
- ``tag-unescaped``: the session tag's HMAC over ``{<user>}:<session>`` without
  escaping the user: events of users with %, { or } in their ids are never matched.
- ``wait-early``: wait answers covered as soon as the hand-over's list is finished,
  forgetting the older lists (``finished >= id`` alone).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from redis.exceptions import RedisError

from conformance.adapters.python_adapter import PythonAdapter, serve
from worker.client import memory_status
from worker.errors import HandoverTooLarge, HandoverUnavailable, InvalidHandover
from worker.protocol import queue
from worker.protocol.keys import SessionRef
from worker.protocol.payload import check_id, parse_messages, recent_window

BUGS = ("member-order", "ascii-escape", "no-window", "one-error-kind", "tag-unescaped",
        "wait-early")


class BrokenAdapter(PythonAdapter):
    def __init__(self, bug: str) -> None:
        super().__init__()
        self.bug = bug

    def _encode(self, fields: dict[str, Any], messages: list[dict[str, str]]) -> bytes:
        if self.bug == "member-order":
            messages = [{"content": m["content"], "role": m["role"]} for m in messages]
        payload = {**fields, "messages": messages,
                   "handed_over_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                   "trace": {}}
        payload = {k: payload[k] for k in ("v", "session_id", "user_id", "messages",
                                           "handed_over_at", "trace")}
        payload.update({k: fields[k] for k in ("agent_id", "listed_at_us") if k in fields})
        return json.dumps(payload, ensure_ascii=self.bug == "ascii-escape",
                          separators=(",", ":")).encode()

    async def handover(self, req: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._handover(req)
        except HandoverTooLarge as exc:
            if self.bug == "one-error-kind":
                raise InvalidHandover(str(exc)) from exc
            raise

    async def session_tag(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.bug != "tag-unescaped" or self.telemetry_id_key is None:
            return await super().session_tag(req)
        text = "{" + req["user_id"] + "}:" + req["session_id"]
        return {"tag": hmac.new(self.telemetry_id_key.encode(), text.encode(),
                                hashlib.sha256).hexdigest()[:16]}

    async def wait(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.bug != "wait-early":
            return await super().wait(req)
        deadline = asyncio.get_running_loop().time() + req["timeout_s"]
        while True:
            state = await memory_status(self._redis(), req["session_id"], req["user_id"])
            if state.finished >= req["handover_id"]:
                return {"covered": True}
            if asyncio.get_running_loop().time() >= deadline:
                return {"covered": False}
            await asyncio.sleep(0.05)

    async def _handover(self, req: dict[str, Any]) -> dict[str, Any]:
        limits = self.limits
        raw = req["messages"] if self.bug == "no-window" else recent_window(req["messages"],
                                                                             limits)
        parsed = parse_messages(raw, limits)
        fields: dict[str, Any] = {
            "v": 1, "session_id": check_id(req["session_id"], "session_id", limits),
            "user_id": check_id(req["user_id"], "user_id", limits)}
        if req.get("agent_id") is not None:
            fields["agent_id"] = check_id(req["agent_id"], "agent_id", limits)
        if req.get("listed_at_us") is not None:
            fields["listed_at_us"] = req["listed_at_us"]
        messages = [{"role": m.role, "content": m.content} for m in parsed]
        payload = self._encode(fields, messages)
        while self.bug != "no-window" and len(payload) > limits.max_handover_bytes \
                and len(messages) > 1:
            messages = messages[1:]
            payload = self._encode(fields, messages)
        if len(payload) > limits.max_handover_bytes:
            raise HandoverTooLarge("the hand-over", len(payload), limits.max_handover_bytes)
        session = SessionRef(fields["user_id"], fields["session_id"])
        try:
            enqueued = await asyncio.wait_for(queue.enqueue(
                self._redis(), session, payload=payload, queue_name=self.queue_name,
                limits=limits), 1.0)
        except (RedisError, OSError, TimeoutError) as exc:
            raise HandoverUnavailable(f"Redis did not take it: {type(exc).__name__}") from exc
        return {"handover_id": enqueued.handover_id, "job_id": enqueued.job_id,
                "kept_older": enqueued.kept_older}


def main() -> int:
    parser = argparse.ArgumentParser(prog="broken_adapter")
    parser.add_argument("--bug", choices=BUGS,
                        default=os.environ.get("CONFORMANCE_BUG", "member-order"))
    args = parser.parse_args()
    return asyncio.run(serve(BrokenAdapter(args.bug)))


if __name__ == "__main__":
    sys.exit(main())
