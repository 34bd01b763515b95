"""Stand-ins for session and user ids in spans; kept apart so the light client can import it.

Keyed (HMAC-SHA-256), so a stand-in cannot be reversed by hashing a dictionary
of likely ids (emails, phone numbers, sequential numbers). Set the same
MEMFLEET_TELEMETRY_ID_KEY on workers and chat servers to match a session's
spans across processes; without it each process draws a key of its own, and
stand-ins only match within that process.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from functools import cache


@cache
def process_key() -> bytes:
    """A random key for this process, used when no key is configured."""
    return secrets.token_bytes(32)


def id_key(configured: str | None) -> bytes:
    return configured.encode() if configured else process_key()


def hashed_id(value: str, key: bytes) -> str:
    """A stable, keyed, non-reversible stand-in for a session or user id."""
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:16]
