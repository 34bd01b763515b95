"""asyncpg's errors become memfleet's at the store's edge, and only there.

Every statement a store runs is wrapped in ``translated``: the server away
(down, restarting, failing over) is StoreUnavailable, a refused statement
StoreError, each named by the error's type only (a server message can quote
the values it refused). The commit routine's own SQLSTATEs become the
pipeline's errors (``commit_error``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from worker.errors import (
    ConfigurationError,
    CursorFenced,
    MemfleetError,
    MemoryOptedOut,
    StoreError,
    StoreUnavailable,
    UserErased,
    UserVersionConflict,
)

PG_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)
# The server is away (down, restarting, failing over), not refusing this query.
PG_DOWN = (OSError, asyncpg.InterfaceError, asyncpg.exceptions.PostgresConnectionError,
           asyncpg.exceptions.OperatorInterventionError,
           asyncpg.exceptions.InsufficientResourcesError)
# SQLSTATEs raised by memfleet_commit_run (schema/routines/memfleet_commit_run.sql).
_CURSOR_MOVED = "MF001"
_USER_CHANGED = "MF002"
_OPTED_OUT = "MF003"
_ERASED = "MF004"
_NO_FENCE_KEY = "MF005"


def store_error(what: str, exc: BaseException) -> MemfleetError:
    """StoreUnavailable when the server is away, StoreError otherwise."""
    error = StoreUnavailable if isinstance(exc, PG_DOWN) else StoreError
    return error(f"{what} failed: {type(exc).__name__}")


@asynccontextmanager
async def translated(what: str) -> AsyncIterator[None]:
    """asyncpg and socket errors as StoreUnavailable (server away) or StoreError."""
    try:
        yield
    except PG_ERRORS as exc:
        raise store_error(what, exc) from exc


def commit_error(exc: asyncpg.PostgresError) -> MemfleetError:
    """What memfleet_commit_run's refusal means for the run (or a StoreError)."""
    if exc.sqlstate == _CURSOR_MOVED:
        return CursorFenced()
    if exc.sqlstate == _USER_CHANGED:
        return UserVersionConflict()
    if exc.sqlstate == _OPTED_OUT:
        return MemoryOptedOut()
    if exc.sqlstate == _ERASED:
        return UserErased(int(getattr(exc, "detail", None) or 0))
    if exc.sqlstate == _NO_FENCE_KEY:
        return ConfigurationError("the commit named no erase fence key")
    return store_error("the persist transaction", exc)


def status_count(status: str) -> int:
    """The row count of a command's status ("UPDATE 3", "DELETE 0")."""
    return int(status.rsplit(" ", 1)[-1])
