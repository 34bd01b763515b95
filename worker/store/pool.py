"""The asyncpg pool: binary pgvector codecs on every connection."""

from __future__ import annotations

from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from worker.errors import StoreError


async def _init_connection(conn: Any) -> None:
    await register_vector(conn)


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> Any:
    """Open a pool; a server that cannot be reached is a StoreError."""
    try:
        return await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            # Statements are prepared once per connection and reused: the
            # pipeline runs the same handful of queries for every job.
            statement_cache_size=256,
            command_timeout=30,
        )
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot connect to PostgreSQL: {type(exc).__name__}: {exc}") from exc
