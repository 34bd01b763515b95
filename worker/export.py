"""The right of access: everything memfleet holds about one user, as one JSON document.

    {"user_id", "exported_at", "consent": {"enabled", "chosen", "updated_at"},
     "facts": [every row, active and superseded, with its chain links],
     "sessions": [cursor rows: counts and the rolling summary],
     "runs": [audit rows that wrote them: slice hashes, counts, times, outcome],
     "held_proposals": [changes consolidation proposed and kept for the user]}

Streamed: rows come from server-side cursors inside one read-only REPEATABLE
READ transaction (one consistent snapshot) and leave in chunks of about
CHUNK_CHARS, so memory stays bounded whatever the user's size. Run errors
are memfleet's own messages, which never quote user content.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from worker.store import queries
from worker.store.postgres import translated

CHUNK_CHARS = 64 * 1024
ROWS_PER_FETCH = 500


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _json(value: Any) -> str:
    return json.dumps(value, default=_iso, ensure_ascii=False, separators=(",", ":"))


async def export_user(pool: Any, user_id: str, *, memory_default: bool) -> AsyncIterator[str]:
    """The user's export, in chunks of JSON text that join into one object."""
    sql = queries.load("export")
    async with translated("exporting a user"), pool.acquire() as conn, \
            conn.transaction(isolation="repeatable_read", readonly=True):
        consent = await conn.fetchrow(sql["consent"], user_id)
        chosen = consent is not None
        head = {
            "user_id": user_id, "exported_at": datetime.now(UTC),
            "consent": {"enabled": consent["enabled"] if chosen else memory_default,
                        "chosen": chosen, "updated_at": consent["updated_at"] if chosen else None},
        }
        buffer = [_json(head)[:-1]]  # the object stays open for the lists
        size = len(buffer[0])
        for section in ("facts", "sessions", "runs", "held_proposals"):
            buffer.append(f',"{section}":[')
            first = True
            async for row in conn.cursor(sql[section], user_id, prefetch=ROWS_PER_FETCH):
                text = _json(dict(row))
                buffer.append(text if first else "," + text)
                first = False
                size += len(text) + 1
                if size >= CHUNK_CHARS:
                    yield "".join(buffer)
                    buffer, size = [], 0
            buffer.append("]")
        buffer.append("}")
        yield "".join(buffer)
