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
    # Non-ASCII as UTF-8: an escaped astral character is 12 bytes, UTF-8 is 4. A lone
    # surrogate has no UTF-8 form: then escaped, as JSON allows.
    try:
        return json.dumps(value, default=_default, ensure_ascii=False,
                          separators=(",", ":")).encode()
    except UnicodeEncodeError:
        return json.dumps(value, default=_default, separators=(",", ":")).encode()


def deserialize(raw: bytes) -> Any:
    return json.loads(raw)
