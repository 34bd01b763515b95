"""Stand-ins for ids in telemetry; kept apart so the light client can import it."""

from __future__ import annotations

import hashlib


def hashed_id(value: str) -> str:
    """A stable, non-reversible stand-in for a session or user id in spans and logs."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]
