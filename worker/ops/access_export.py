"""The right of access: everything memfleet holds about one user, as one JSON document.

    {"user_id", "exported_at", "consent": {"enabled", "chosen", "updated_at"},
     "facts": [every row, active and superseded, with its chain links],
     "sessions": [cursor rows: counts and the rolling summary],
     "runs": [audit rows that wrote them: slice hashes, counts, times, outcome],
     "held_proposals": [changes consolidation proposed and kept for the user],
     "portraits": [every version of the user's portrait, and how each ended],
     "notes": [every note beside the facts, and what became of it (docs/notes.md)]}

Streamed: rows come from server-side cursors inside one read-only REPEATABLE
READ transaction (one consistent snapshot: worker.store.maintenance) and
leave in chunks of about CHUNK_CHARS, so memory stays bounded whatever the
user's size. Run errors are memfleet's own messages, which never quote user
content.

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
from collections.abc import AsyncGenerator
from contextlib import aclosing
from datetime import UTC, datetime
from typing import IO, Any

from worker.errors import StoreError
from worker.store.base import MaintenanceStore
from worker.store.types import EXPORT_SECTIONS

CHUNK_CHARS = 64 * 1024
# A spool keeps this much in memory; a larger export goes on to disk (TMPDIR).
SPOOL_MEMORY_BYTES = 1_048_576


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _json(value: Any) -> str:
    return json.dumps(value, default=_iso, ensure_ascii=False, separators=(",", ":"))


async def export_user(
    store: MaintenanceStore, user_id: str, *, memory_default: bool,
    acquire_timeout_s: float | None = None,
) -> AsyncGenerator[str, None]:
    """The user's export, in chunks of JSON text that join into one object.

    ``acquire_timeout_s``: how long to wait for a pooled connection (None: as long as
    it takes); StoreUnavailable beyond it.
    """
    async with store.export_snapshot(user_id, acquire_timeout_s=acquire_timeout_s) as snapshot:
        consent = await snapshot.consent()
        head = {
            "user_id": user_id, "exported_at": datetime.now(UTC),
            "consent": {"enabled": memory_default, "chosen": False, "updated_at": None}
            if consent is None else {"enabled": consent["enabled"], "chosen": True,
                                     "updated_at": consent["updated_at"]},
        }
        buffer = [_json(head)[:-1]]  # the object stays open for the lists
        size = len(buffer[0])
        for section in EXPORT_SECTIONS:
            buffer.append(f',"{section}":[')
            first = True
            async for row in snapshot.rows(section):
                text = _json(row)
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
    store: MaintenanceStore, user_id: str, *, memory_default: bool, acquire_timeout_s: float,
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
                store, user_id, memory_default=memory_default,
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
