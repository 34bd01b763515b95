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

``spool_export`` is the form for a network client: the snapshot is read whole
into a spool (memory up to SPOOL_MEMORY_BYTES, then a temporary file unlinked
from the start, so nothing is left behind even by a crash), within a time
budget, and the pooled connection goes back before the first byte is sent. A
client that reads slowly, or never, then holds a file, never a connection or
a transaction (an open snapshot would also hold back VACUUM for its length).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from datetime import UTC, datetime
from typing import IO, Any

from worker.errors import StoreError, StoreUnavailable
from worker.store import queries
from worker.store.postgres import translated

CHUNK_CHARS = 64 * 1024
ROWS_PER_FETCH = 500
# A spool keeps this much in memory; a larger export goes on to disk (TMPDIR).
SPOOL_MEMORY_BYTES = 1_048_576


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _json(value: Any) -> str:
    return json.dumps(value, default=_iso, ensure_ascii=False, separators=(",", ":"))


@asynccontextmanager
async def _connection(pool: Any, timeout_s: float | None) -> AsyncIterator[Any]:
    try:
        conn = await pool.acquire(timeout=timeout_s)
    except TimeoutError:  # asyncpg's own; an OSError, which translated() would blur
        raise StoreUnavailable(
            f"exporting a user: no database connection within {timeout_s:g} s") from None
    try:
        yield conn
    finally:
        await pool.release(conn)


async def export_user(
    pool: Any, user_id: str, *, memory_default: bool, acquire_timeout_s: float | None = None
) -> AsyncGenerator[str, None]:
    """The user's export, in chunks of JSON text that join into one object.

    ``acquire_timeout_s``: how long to wait for a pooled connection (None: as long as
    it takes); TimeoutError beyond it.
    """
    sql = queries.load("export")
    async with translated("exporting a user"), _connection(pool, acquire_timeout_s) as conn, \
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


async def spool_export(
    pool: Any, user_id: str, *, memory_default: bool, acquire_timeout_s: float,
    read_timeout_s: float,
) -> IO[bytes]:
    """The user's export as UTF-8 JSON in a spool, rewound, its connection given back.

    The caller closes the spool. StoreUnavailable when no connection comes within
    ``acquire_timeout_s``; StoreError when the snapshot takes longer than
    ``read_timeout_s`` (the connection is given back either way).
    """
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 - returned
    try:
        async with asyncio.timeout(read_timeout_s), aclosing(export_user(
                pool, user_id, memory_default=memory_default,
                acquire_timeout_s=acquire_timeout_s)) as chunks:
            async for chunk in chunks:
                spool.write(chunk.encode())
        spool.seek(0)
    except TimeoutError:
        spool.close()
        raise StoreError(
            f"exporting a user: the snapshot took longer than {read_timeout_s:g} s") from None
    except BaseException:
        spool.close()
        raise
    return spool
