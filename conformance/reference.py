"""What the protocol says a client writes, from the reference implementation
(worker.protocol) and docs/protocol.md, for the checks to compare an adapter's
writes with, byte for byte."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from worker.protocol.keys import SessionRef
from worker.protocol.payload import Handover, Limits, encode_handover, parse_messages

_PLACEHOLDER_TIME = datetime(2000, 1, 1, tzinfo=UTC)
# docs/protocol.md, "The payload": handed_over_at, then trace, an object of strings.
_ENVELOPE = re.compile(rb',"handed_over_at":"([^"\\]*)","trace":(\{[^{}]*\})')
_ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|\+00:00)")
_TRACE_MEMBERS = {"traceparent", "tracestate"}
JOB_ID = re.compile(r"memfleet-[0-9a-f]{32}")


class Mismatch(AssertionError):
    """What an adapter wrote differs from what the protocol says."""


def compact(value: Any) -> str:
    """JSON as the protocol writes strings (docs/protocol.md, "The messages text")."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _envelope(raw: bytes) -> tuple[bytes, bytes]:
    """The adapter's ``handed_over_at`` and ``trace`` texts, checked for form and time."""
    found = _ENVELOPE.search(raw)
    if found is None:
        raise Mismatch("no ',\"handed_over_at\":\"...\",\"trace\":{...}' in the payload")
    stamp, trace = found.group(1).decode("utf-8", "replace"), found.group(2)
    if not _ISO_UTC.fullmatch(stamp):
        raise Mismatch(f"handed_over_at {stamp!r} is not ISO 8601 in UTC")
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if abs(datetime.now(UTC) - when) > timedelta(minutes=5):
        raise Mismatch(f"handed_over_at {stamp!r} is not now")
    members = json.loads(trace)
    if not set(members) <= _TRACE_MEMBERS or not all(isinstance(v, str) for v in members.values()):
        raise Mismatch(f"trace {trace!r} holds more than traceparent and tracestate strings")
    return found.group(1), trace


def expected_payload(raw: bytes, *, user_id: str, session_id: str,
                     messages: list[dict[str, str]], agent_id: str | None = None,
                     listed_at_us: int | None = None) -> bytes:
    """The payload the reference client writes for this input, with the adapter's own
    hand-over time and trace context in it (both are the adapter's to choose)."""
    stamp, trace = _envelope(raw)
    handover = Handover(session_id=session_id, user_id=user_id,
                        messages=parse_messages(messages, Limits()),
                        handed_over_at=_PLACEHOLDER_TIME, agent_id=agent_id,
                        listed_at_us=listed_at_us)
    reference = encode_handover(handover)
    placeholder = _ENVELOPE.search(reference)
    assert placeholder is not None
    return (reference[:placeholder.start()] + b',"handed_over_at":"' + stamp
            + b'","trace":' + trace + reference[placeholder.end():])


def first_difference(got: bytes, want: bytes) -> str:
    """Where two byte strings part, quoted around that place."""
    at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
              min(len(got), len(want)))
    start = max(0, at - 30)
    def shown(text: bytes) -> str:
        return repr(text[start:at + 30].decode("utf-8", "replace"))
    return (f"differs at byte {at}: got {shown(got)}, want {shown(want)}"
            f" (lengths {len(got)} and {len(want)})")


def expected_job(raw: bytes, user_id: str, session_id: str) -> bytes:
    """The ARQ job's JSON (docs/protocol.md, "The ARQ job") with the adapter's ``et``."""
    found = re.search(rb',"et":(\d+)\}$', raw)
    if found is None:
        raise Mismatch(f"the job does not end in ',\"et\":<ms>}}': {raw[-40:]!r}")
    et_ms = int(found.group(1))
    now_ms = datetime.now(UTC).timestamp() * 1000
    if abs(now_ms - et_ms) > 300_000:
        raise Mismatch(f"the job's et {et_ms} is not now in ms")
    kwargs = compact({"user_id": user_id, "session_id": session_id})
    return (f'{{"t":null,"f":"persist_session_memory","a":[],"k":{kwargs},"et":{et_ms}}}'
            .encode())


def session_tag(user_id: str, session_id: str, key: str) -> str:
    """docs/protocol.md, "The commit events": the first 16 hex digits of HMAC-SHA-256
    over the session key, keyed by MEMFLEET_TELEMETRY_ID_KEY; written out here rather
    than taken from worker.telemetry_ids, so that the check stands on the doc."""
    session_key = SessionRef(user_id, session_id).key
    return hmac.new(key.encode(), session_key.encode(), hashlib.sha256).hexdigest()[:16]
