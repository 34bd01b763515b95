"""Redis replies as text or bytes, whatever the client's ``decode_responses``.

memfleet runs on the caller's own client (a chat server's may decode replies,
ARQ's does not), so every reply it reads goes through one of these.
"""

from __future__ import annotations

from typing import Any


def as_text(value: Any) -> str:
    """A reply (bytes, str or a number) as text; bytes are UTF-8."""
    return value.decode() if isinstance(value, bytes) else str(value)


def as_bytes(value: Any) -> bytes:
    """A reply (bytes, str or a number) as bytes; text is encoded as UTF-8."""
    return value if isinstance(value, bytes) else str(value).encode()
