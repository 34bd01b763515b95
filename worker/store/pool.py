"""The asyncpg pool: binary pgvector codecs on every connection."""

from __future__ import annotations

import asyncio
from typing import Any, Self

import asyncpg
from pgvector import HalfVector
from pgvector.asyncpg import register_vector

from worker.errors import ConfigurationError, StoreError
from worker.server_address import address, network_reason, unreachable
from worker.store import halfvec

SETTING = "MEMFLEET_DATABASE_URL"


class _NoResetConnection(asyncpg.Connection):  # type: ignore[misc]
    """For the workers' pool (``reset=False``): the pipeline's statements leave no
    session state (no SET, LISTEN or advisory locks; migrate uses its own
    connection), so the reset asyncpg sends on every release is pure round
    trips. Open transactions are still rolled back by asyncpg itself."""

    def get_reset_query(self) -> str:
        return ""


async def _init_connection(conn: Any) -> None:
    try:
        await register_vector(conn)
    except ValueError:  # pgvector's "unknown type: public.vector"
        raise ConfigurationError("the database has no memfleet schema (no vector type): run "
                                 "`memfleet migrate` with this MEMFLEET_DATABASE_URL") from None
    # The same binary format, but rows the store encoded a matrix at a time pass
    # straight through (worker.store.halfvec).
    await conn.set_type_codec("halfvec", encoder=halfvec.encode, decoder=HalfVector.from_binary,
                              format="binary")


# For the workers' pool. Every statement of the job pipeline has one good plan
# whatever its parameters (lookups by session or user id); by default
# PostgreSQL re-plans a prepared statement for its first executions and keeps
# re-planning whenever a custom plan looks cheaper, which costs the neighbour
# query measurably (docs/bench.md).
GENERIC_PLANS = {"plan_cache_mode": "force_generic_plan"}


# How long a store of its own (``PooledStore.connect``: the CLI's commands, the reader,
# the demo) waits for PostgreSQL to take a connection: something on that port that
# never answers as PostgreSQL does (a Redis, a firewall) is said, not waited out.
CONNECT_TIMEOUT_S = 10.0


async def create_pool(
    dsn: str, *, min_size: int = 1, max_size: int = 10,
    server_settings: dict[str, str] | None = None, reset: bool = True,
    connect_timeout_s: float = 60.0,
) -> Any:
    """Open a pool; a server that cannot be reached is a StoreError.

    ``reset=False`` skips asyncpg's session reset on release: only for pools
    whose users never change session state (the workers' pipeline).
    ``connect_timeout_s``: for each new connection (asyncpg's default).
    """
    try:
        return await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            connection_class=asyncpg.Connection if reset else _NoResetConnection,
            # Statements are prepared once per connection and reused: the
            # pipeline runs the same handful of queries for every job.
            statement_cache_size=256,
            command_timeout=30,
            server_settings=server_settings,
            timeout=connect_timeout_s,
        )
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(connection_failure(dsn, exc)) from exc


# How long a shutdown waits for the pool's connections to come back before it closes
# them anyway.
CLOSE_TIMEOUT_S = 10.0


async def close_pool(pool: Any, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Close ``pool``, waiting at most ``timeout_s`` for its connections to be released.

    asyncpg's ``close`` waits for every acquired connection, and one acquired by a task
    cancelled mid-connect (a server check at shutdown, a server away) may never come
    back: a process on its way out must not hang on it, so past the bound the pool is
    terminated (its connections closed at once)."""
    try:
        await asyncio.wait_for(pool.close(), timeout_s)
    except TimeoutError:
        pool.terminate()


def connection_failure(dsn: str | None, exc: BaseException) -> str:
    """Why PostgreSQL at ``dsn`` took no connection, in one line that names the server
    (never the URL's credentials) and what to check."""
    where = f"PostgreSQL at {address(dsn)}"
    if isinstance(exc, asyncpg.InvalidCatalogNameError | asyncpg.InvalidSchemaNameError):
        return f"{where}: {exc}: check the database name in {SETTING}"
    if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError
                  | asyncpg.InvalidPasswordError):
        return f"{where} refused the login ({exc}): check the user and password in {SETTING}"
    if isinstance(exc, asyncpg.ClientConfigurationError):
        return f"{SETTING} is not a usable PostgreSQL URL ({type(exc).__name__})"
    if isinstance(exc, asyncpg.PostgresError):
        return f"{where} refused the connection ({type(exc).__name__}: {exc}): check {SETTING}"
    reason = network_reason(exc)
    if reason is None:  # the server answered, but not as PostgreSQL does
        reason = f"{type(exc).__name__}: is it a PostgreSQL server?"
    return unreachable("PostgreSQL", SETTING, dsn, reason)


class PooledStore:
    """A store on an asyncpg pool: one it is given (shared, closed by its owner), or one
    of its own (``connect``), closed by ``aclose``. Nothing outside worker.store
    needs to hold a pool to use a store."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._owned = False

    @classmethod
    async def connect(cls, dsn: str, *, min_size: int = 1, max_size: int = 2,
                      **options: Any) -> Self:
        """A store with a pool of its own on ``dsn``; ``options`` go to the constructor."""
        pool = await create_pool(dsn, min_size=min_size, max_size=max_size,
                                 connect_timeout_s=CONNECT_TIMEOUT_S)
        try:
            store = cls(pool, **options)
        except BaseException:
            await pool.close()
            raise
        store._owned = True
        return store

    async def aclose(self) -> None:
        """Close the store's own pool; a pool it was given stays open."""
        if self._owned:
            self._owned = False
            await self._pool.close()
