"""Golden fixtures of the hand-over protocol, written by the Python reference for the
TypeScript client's unit tests (clients/typescript/src/test/unit/): validation reasons,
windowing, payload bytes, the ARQ job, enqueue.lua's KEYS and ARGV, session tags.

    python -m tests.unit.protocol.typescript_fixtures    # rewrite the file

tests/unit/protocol/test_typescript_fixtures.py fails when the file and what this
module builds differ, so neither side can drift from the other unnoticed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

from worker.errors import InvalidHandover
from worker.protocol import queue
from worker.protocol.events import session_tag
from worker.protocol.keys import SessionRef
from worker.protocol.payload import (
    Handover,
    Limits,
    check_id,
    fit_handover,
    parse_messages,
    recent_window,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "protocol" / "handover_cases.json"
AT = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
SMALL = Limits(max_message_chars=100, max_messages=5, max_id_chars=10, max_message_bytes=120,
               max_handover_bytes=400, max_session_bytes=4000, max_user_sessions=3)


def _limits_json(limits: Limits) -> dict[str, int]:
    return {"maxMessageChars": limits.max_message_chars, "maxMessages": limits.max_messages,
            "maxIdChars": limits.max_id_chars, "maxMessageBytes": limits.max_message_bytes,
            "maxHandoverBytes": limits.max_handover_bytes,
            "maxSessionBytes": limits.max_session_bytes,
            "maxUserSessions": limits.max_user_sessions}


def _u(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _handover(case: dict[str, Any], limits: Limits) -> tuple[Handover, bytes]:
    """What schedule_memory_persistence builds, checked in its order (ids, messages, agent)."""
    handover = Handover(
        session_id=check_id(case["session_id"], "session_id", limits),
        user_id=check_id(case["user_id"], "user_id", limits),
        messages=parse_messages(recent_window(case["messages"], limits), limits),
        handed_over_at=datetime.fromisoformat(case.get("handed_over_at", AT.isoformat())),
        trace=case.get("trace", {}),
        agent_id=None if case.get("agent_id") is None
        else check_id(case["agent_id"], "agent_id", limits),
        listed_at_us=case.get("listed_at_us"),
    )
    return fit_handover(handover, limits)


def _invalid_inputs() -> Iterator[tuple[dict[str, Any], Limits]]:
    ok = [_u("hello")]
    for bad_id in ["", "   ", "\x1c", None, 5, "x" * 11, "tab\there", "del\x7f", "c1\x85",
                   "lone \ud800", "new\nline"]:
        yield {"session_id": bad_id, "user_id": "ada", "messages": ok}, SMALL
        yield {"session_id": "1", "user_id": bad_id, "messages": ok}, SMALL
        if bad_id is not None:  # an agent id of None is no agent id
            yield {"session_id": "1", "user_id": "ada", "messages": ok, "agent_id": bad_id}, SMALL
    yield {"session_id": "", "user_id": "", "messages": "nope"}, SMALL  # the first fault wins
    for messages in ["not a list", None, {"role": "user"}, [{"role": "user"}], [{"content": "x"}],
                     [{}], ["hi"], [None], [[1]], [{"role": "wizard", "content": "x"}],
                     [{"role": "User", "content": "x"}], [{"role": None, "content": None}],
                     [{"role": "user", "content": 5}], [{"role": "user", "content": True}],
                     [{"role": "user", "content": ""}], [{"role": "user", "content": " \n\t"}],
                     [{"role": "user", "content": "\x1c\x1d"}],
                     [{"role": "user", "content": "x" * 101}],
                     [{"role": "user", "content": "😀" * 100}],
                     [{"role": "user", "content": "é" * 61}],
                     [{"role": "user", "content": "bell\x07"}],
                     [{"role": "user", "content": "c1\x9f"}],
                     [{"role": "user", "content": "lone \udfff surrogate"}],
                     [_u("fine"), {"role": "assistant", "content": ""}]]:
        yield {"session_id": "1", "user_id": "ada", "messages": messages}, SMALL
    # Over the hand-over budget with the newest message alone: HandoverTooLarge.
    yield {"session_id": "1", "user_id": "ada", "messages": [_u("é" * 60), _u("a" * 100)],
           "agent_id": "a" * 10, "trace": TRACE}, Limits(max_handover_bytes=300)
    yield {"session_id": "1", "user_id": "ada", "messages": [_u("a" * 100)]}, \
        Limits(max_handover_bytes=150)


def _valid_inputs() -> Iterator[tuple[dict[str, Any], Limits]]:
    yield {"session_id": "1", "user_id": "alice",
           "messages": [_u("I moved to Lyon — “café”"), {"role": "assistant", "content": "Noted."}],
           "trace": TRACE, "agent_id": "coach", "listed_at_us": 1777636800123456}, Limits()
    yield {"session_id": "s:1", "user_id": "a{b}%c",
           "messages": [{"role": "system", "content": "quote \" back\\slash\ttab\r\nnew"},
                        {"role": "tool", "content": "😀 \u2028 \u2029 </script> ünï"},
                        {"role": "user", "content": "x", "name": "dropped", "extra": [1]}],
           "handed_over_at": "2026-05-01T12:00:00+00:00"}, Limits()
    yield {"session_id": "日本", "user_id": "ü", "messages": [_u("only agent")],
           "agent_id": "luna", "handed_over_at": "2026-05-01T12:00:00.120000+00:00"}, Limits()
    # A BOM is no whitespace to Python (JavaScript's trim() would drop it).
    yield {"session_id": "\ufeff", "user_id": "ada", "messages": [_u("\ufeff")]}, Limits()
    yield {"session_id": "1", "user_id": "ada", "messages": [_u("listed")],
           "listed_at_us": 0}, Limits()
    # Windows: by count, by characters (recent_window), by bytes (fit_handover).
    yield {"session_id": "1", "user_id": "ada",
           "messages": [_u(f"message {i}") for i in range(8)]}, SMALL
    yield {"session_id": "1", "user_id": "ada",
           "messages": [_u("a" * 90), _u("b" * 90), _u("c" * 90), _u("d" * 90)]}, SMALL
    yield {"session_id": "1", "user_id": "ada",
           "messages": [_u("é" * 50), _u("ü" * 50), _u("ö" * 50), _u("x")], "agent_id": "a"}, SMALL
    yield {"session_id": "1", "user_id": "ada",
           "messages": [{"role": "user", "content": 5}, _u("x" * 60), _u("a" * 100),
                        _u("b" * 100), _u("c" * 100), _u("d" * 100)]}, \
        Limits(max_messages=10, max_handover_bytes=400)  # the bad one is outside the window


def build() -> dict[str, Any]:
    invalid = []
    for case, limits in _invalid_inputs():
        try:
            _handover(case, limits)
        except InvalidHandover as exc:
            invalid.append({"input": case, "limits": _limits_json(limits),
                            "error": type(exc).__name__, "reason": str(exc)})
        else:
            raise AssertionError(f"not refused: {case!r}")
    payloads = []
    for case, limits in _valid_inputs():
        handover, payload = _handover(case, limits)
        payloads.append({"input": case, "limits": _limits_json(limits),
                         "handed_over_at": handover.model_dump(mode="json")["handed_over_at"],
                         "payload": payload.decode()})
    times = []
    for ms in (1777636800000, 1777636800001, 1777636800120, 1777636800999, 0):
        moment = datetime.fromtimestamp(ms / 1000, UTC)
        times.append({"ms": ms, "iso": Handover(session_id="1", user_id="1", messages=(),
                                                handed_over_at=moment)
                      .model_dump(mode="json")["handed_over_at"]})
    return {"about": "written by tests/unit/protocol/typescript_fixtures.py: do not edit",
            "invalid": invalid, "payloads": payloads, "times": times,
            "enqueue": [_enqueue_call("alice", "1", Limits(), "memfleet:queue"),
                        _enqueue_call("a{b}%c", "s:1 ü", SMALL, "fleet-b")],
            "jobs": [{"user_id": u, "session_id": s, "et": 1777636800123,
                      "json": queue.job_bytes(SessionRef(u, s), 1777636800123).decode()}
                     for u, s in [("alice", "1"), ("a{b}%c", "s:1 “ü”"), ('q"\\', "日本")]],
            "session_tags": [{"user_id": u, "session_id": s, "key": k,
                              "tag": session_tag(SessionRef(u, s), k)}
                             for u, s, k in [("alice", "1", "key"), ("a{b}%c", "s:1", "kéy"),
                                             ("ü", "日本", "0123456789abcdef" * 4)]]}


def _enqueue_call(user_id: str, session_id: str, limits: Limits, queue_name: str) -> dict[str, Any]:
    """What worker.protocol.queue.enqueue passes to enqueue.lua, recorded at a fixed
    time and job id."""
    calls: list[tuple[Any, ...]] = []

    class Recorder:
        async def evalsha(self, *args: Any) -> list[Any]:
            calls.append(args)
            return [b"memfleet-job", 0, b"1"]

    job_hex = "0f8e4f3c2a9b4d6e8f7a6b5c4d3e2f1a"
    with _fixed(1777636800.123, job_hex):
        asyncio.run(queue.enqueue(Recorder(), SessionRef(user_id, session_id), payload=b"{}",
                                  queue_name=queue_name, limits=limits))
    _sha, count, *rest = calls[0]
    text = [v.decode() if isinstance(v, bytes) else str(v) for v in rest]
    return {"user_id": user_id, "session_id": session_id, "queue": queue_name,
            "limits": _limits_json(limits), "payload": "{}", "now_ms": 1777636800123,
            "job_id": f"memfleet-{job_hex}", "keys": text[:count], "args": text[count:]}


@contextmanager
def _fixed(now_s: float, job_hex: str) -> Iterator[None]:
    with (mock.patch("worker.protocol.queue.time.time", return_value=now_s),
          mock.patch("worker.protocol.queue.uuid.uuid4", return_value=mock.Mock(hex=job_hex))):
        yield


def render() -> str:
    return json.dumps(build(), indent=1, ensure_ascii=True) + "\n"


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(render(), "utf-8")
    sys.stdout.write(f"wrote {FIXTURE}\n")
