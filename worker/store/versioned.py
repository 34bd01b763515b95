"""The user-version compare-and-set of the memory API's writes, on PostgreSQL.

Every write of a user's facts by hand (add, remove, pin, edit, a held proposal
accepted) runs in one transaction that first wins the user's version
(memfleet_bump_user_version), as a worker's commit does: the two serialise per
user, and a consolidation that read the neighbours before the write re-reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Any, TypeVar

from worker.errors import UserVersionConflict
from worker.store import queries
from worker.store.pool import PooledStore
from worker.store.translate import translated
from worker.store.types import FactRecord

# A lost compare-and-set in a manual write only means a worker committed for
# this user a moment ago; trying again is cheap and almost always wins.
CAS_ATTEMPTS = 5
_FACT_COLUMNS = tuple(f.name for f in fields(FactRecord))

T = TypeVar("T")


class RowMissing(Exception):
    """The targeted row is not there (or no longer active): rolls the write back."""


def fact_of(row: Any) -> FactRecord:
    return FactRecord(**{name: row[name] for name in _FACT_COLUMNS})


class VersionedWrites(PooledStore):
    async def _versioned(
        self, what: str, user_id: str, write: Callable[[Any], Awaitable[T]], *,
        user_lock: bool = False,
    ) -> T | None:
        """Run ``write`` in a transaction that also wins the user-version compare-and-set;
        None (nothing written, the version untouched) when it raises RowMissing. Any
        other exception it raises rolls the transaction back and passes through.
        ``user_lock``: the user's advisory lock, shared, first (as a worker's commit
        takes it): a consent change or an erase waits for the write, or it for them."""
        api = queries.load("memory_api")
        for _ in range(CAS_ATTEMPTS):
            try:
                async with translated(what), self._pool.acquire() as conn, conn.transaction():
                    if user_lock:
                        await conn.execute(api["lock_user_shared"], user_id)
                    version = await conn.fetchval(api["user_version"], user_id)
                    bumped = await conn.fetchval(api["bump_user_version"], user_id, version)
                    if bumped is None:
                        raise UserVersionConflict()
                    return await write(conn)
            except RowMissing:
                return None
            except UserVersionConflict:
                continue
        raise UserVersionConflict()
