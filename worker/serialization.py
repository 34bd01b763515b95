"""Job and result serialization: plain JSON.

ARQ's default serializer rebuilds arbitrary Python objects, which lets anyone
who can write to Redis run code on the workers; memfleet's jobs and results are
plain JSON.
"""

from __future__ import annotations

import json
from typing import Any


def _default(value: Any) -> Any:
    if isinstance(value, BaseException):
        # A failed job's result: keep the type, never an arbitrary repr.
        return {"error": type(value).__name__}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def serialize(value: Any) -> bytes:
    return json.dumps(value, default=_default, separators=(",", ":")).encode()


def deserialize(raw: bytes) -> Any:
    return json.loads(raw)
