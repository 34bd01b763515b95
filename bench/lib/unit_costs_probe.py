"""What the unit-cost bench reads of Redis and PostgreSQL: counters before and after a step.

Redis: INFO commandstats (calls and server microseconds by command; a command a Lua
script runs through redis.call is counted under its own name as well as the EVALSHA
that ran it), INFO cpu (the server process's user + system CPU seconds) and INFO
memory (used_memory). The bench's own INFO calls are left out of every delta.
PostgreSQL: rows inserted / updated / deleted by table (pg_stat_user_tables, read
after the statistics are flushed) and the WAL position (pg_current_wal_lsn).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

SCRIPT_COMMANDS = frozenset({"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro"})
_OWN = frozenset({"info", "memory|usage", "memory"})


@dataclass(frozen=True, slots=True)
class RedisCounters:
    calls: Counter[str]
    usec: Counter[str]
    cpu_s: float
    used_memory: int


@dataclass(frozen=True, slots=True)
class RedisDelta:
    calls: dict[str, int]
    usec: int
    cpu_s: float
    used_memory: int

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def script_calls(self) -> int:
        return sum(n for name, n in self.calls.items() if name in SCRIPT_COMMANDS)

    @property
    def inside_scripts_or_direct(self) -> int:
        return self.total_calls - self.script_calls


async def redis_counters(redis: Redis) -> RedisCounters:
    stats: dict[str, Any] = await redis.info("commandstats")
    cpu: dict[str, Any] = await redis.info("cpu")
    memory: dict[str, Any] = await redis.info("memory")
    calls: Counter[str] = Counter()
    usec: Counter[str] = Counter()
    for name, value in stats.items():
        command = name.removeprefix("cmdstat_")
        calls[command] = int(value["calls"])
        usec[command] = int(value["usec"])
    return RedisCounters(calls, usec, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
                         int(memory["used_memory"]))


def redis_delta(before: RedisCounters, after: RedisCounters) -> RedisDelta:
    calls = {name: after.calls[name] - before.calls[name] for name in after.calls
             if name not in _OWN and after.calls[name] != before.calls[name]}
    usec = sum(after.usec[name] - before.usec[name] for name in after.usec if name not in _OWN)
    return RedisDelta(dict(sorted(calls.items(), key=lambda kv: -kv[1])), usec,
                      after.cpu_s - before.cpu_s, after.used_memory - before.used_memory)


@dataclass(frozen=True, slots=True)
class PgCounters:
    rows: dict[str, tuple[int, int, int]]  # table: inserted, updated, deleted
    wal_lsn: str


@dataclass(frozen=True, slots=True)
class PgDelta:
    rows: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    wal_bytes: int = 0

    @property
    def rows_written(self) -> int:
        return sum(sum(v) for v in self.rows.values())


async def pg_counters(db: asyncpg.Connection) -> PgCounters:
    # A backend flushes its table statistics at most once a second: wait for them.
    await asyncio.sleep(1.5)
    await db.execute("SELECT pg_stat_clear_snapshot()")
    rows = await db.fetch("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del"
                          " FROM pg_stat_user_tables")
    lsn = await db.fetchval("SELECT pg_current_wal_lsn()::text")
    return PgCounters({r["relname"]: (int(r["n_tup_ins"]), int(r["n_tup_upd"]),
                                      int(r["n_tup_del"])) for r in rows}, str(lsn))


async def pg_delta(db: asyncpg.Connection, before: PgCounters, after: PgCounters) -> PgDelta:
    wal = await db.fetchval("SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint",
                            after.wal_lsn, before.wal_lsn)
    rows: dict[str, tuple[int, int, int]] = {}
    for table, now in after.rows.items():
        was = before.rows.get(table, (0, 0, 0))
        diff = (now[0] - was[0], now[1] - was[1], now[2] - was[2])
        if any(diff):
            rows[table] = diff
    return PgDelta(rows, int(wal))


async def fact_storage(db: asyncpg.Connection) -> dict[str, Any]:
    """memory_fact's bytes on disk (after VACUUM): heap, TOAST, each index; its rows."""
    await db.execute("VACUUM (ANALYZE) memory_fact")
    row = await db.fetchrow(
        "SELECT count(*) AS rows, count(*) FILTER (WHERE superseded_at IS NULL) AS active,"
        " avg(pg_column_size(embedding))::float8 AS vector_bytes,"
        " avg(pg_column_size(f.*))::float8 AS row_bytes,"
        " min(vector_dims(embedding)) AS dim,"
        " pg_relation_size('memory_fact') AS heap,"
        " pg_table_size('memory_fact') AS table_size,"
        " pg_indexes_size('memory_fact') AS indexes"
        " FROM memory_fact AS f")
    indexes = await db.fetch(
        "SELECT indexrelid::regclass::text AS name, pg_relation_size(indexrelid) AS bytes"
        " FROM pg_index WHERE indrelid = 'memory_fact'::regclass ORDER BY 2 DESC")
    return {
        "rows": int(row["rows"]), "active": int(row["active"]), "dim": int(row["dim"]),
        "vector_bytes": float(row["vector_bytes"]), "row_bytes": float(row["row_bytes"]),
        "heap": int(row["heap"]), "toast": int(row["table_size"]) - int(row["heap"]),
        "indexes": int(row["indexes"]),
        "by_index": {r["name"]: int(r["bytes"]) for r in indexes},
    }


def postgres_cpu_s(root: Path) -> float:
    """CPU seconds of the cluster under ``root``: the postmaster's own, its reaped
    children's (a closed connection's backend lands in cutime/cstime) and its live
    children's (/proc; Linux)."""
    postmaster = int(next(root.rglob("postmaster.pid")).read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            pid = int(stat.parent.name)
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if pid == postmaster:
                total += sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
            elif int(fields[1]) == postmaster:
                total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def wal_stats(db: asyncpg.Connection) -> tuple[int, int]:
    """pg_stat_wal's records and full-page images so far."""
    row = await db.fetchrow("SELECT wal_records, wal_fpi FROM pg_stat_wal")
    return int(row["wal_records"]), int(row["wal_fpi"])
