"""The fact table unpartitioned (the schema up to 0012) beside hash-partitioned by user
(0013, MEMFLEET_PG_PARTITIONS): a run's commit, the neighbour query and VACUUM.

One throwaway PostgreSQL (durable=False, bench.lib.servers' shared_buffers), two
databases: ``flat`` migrated with a copy of schema/ that stops at 0012, and
``partitioned`` migrated with all of it (``--partitions``, default 16). Each is
filled the same way, straight in SQL, as bench/neighbors_scale.py fills its table:
``--facts`` rows of typical users of 200 active facts, written interleaved
across users (one user's rows on many heap pages), embeddings random unit
halfvec(1536) from a pool.

Then, on each, with a pool built as the worker's (generic plans):
- commit: ``PostgresStore.commit_run`` for ``--commits`` users picked at random,
  each writing 3 new facts and superseding one of its own, with the cursor
  and user-version compare-and-sets (memfleet_commit_run, one round trip);
- neighbours: ``PostgresStore.neighbors`` (10 candidates, k=5) for ``--queries``
  users at random;
- vacuum: 1 active row in 20 superseded (dead versions on every user's pages),
  then ``VACUUM memory_fact`` timed whole (every partition, in turn); again,
  then VACUUM of the unit an (auto)vacuum worker takes on at once (the whole
  table, or one partition); then ``ANALYZE memory_fact``;
- and last, the upgrade: 0013 applied to the filled unpartitioned database.

    .venv/bin/python -m bench.partitions [--facts 1000000] [--partitions 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import numpy as np

from bench.lib.servers import SHARED_BUFFERS, throwaway_servers
from bench.lib.stats import ms, pct, table
from bench.neighbors_scale import BYTES_PER_FACT, FILL_POOL, MODEL
from worker.store.fence_key import FenceKeys
from worker.store.migrate import default_schema_dir, migrate
from worker.store.pool import GENERIC_PLANS, create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import (
    CursorAdvance,
    ExistingRow,
    InsertFact,
    RunCommit,
    RunRecord,
    SupersedeFact,
    Vector,
)

DIM = 1536
TYPICAL_FACTS = 200
CANDIDATES = 10
K = 5
NEW_FACTS = 3
DEAD_EVERY = 20

DEAD_ROWS = """
UPDATE memory_fact SET superseded_at = now(), superseded_reason = 'deleted'
WHERE superseded_at IS NULL AND id % $2::int = $1::int
"""

FILL_FACTS = """
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at, source_kind)
SELECT 'user-' || lpad((r % $2::int)::text, 7, '0'), 'fact ' || r, 'fact', 5, e.embedding,
       $3, now(), 'backfill'
FROM generate_series(0::bigint, $1::bigint - 1) AS r
JOIN bench_embedding AS e ON e.slot = abs(hashint8(r)) % $4::int
"""


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.partitions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--pool", type=int, default=4096, help="distinct random embeddings")
    parser.add_argument("--seed", type=int, default=5)
    return parser.parse_args(argv)


def _unit(rng: np.random.Generator, rows: int) -> Vector:
    raw = rng.standard_normal((rows, DIM)).astype(np.float32)
    unit: Vector = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    return unit


def _schema_before(root: Path) -> Path:
    """schema/ as it stood before 0013: the unpartitioned table."""
    before = root / "schema-0012"
    shutil.copytree(default_schema_dir(), before, ignore=shutil.ignore_patterns("__*"))
    for later in before.glob("0*.sql"):
        if later.name >= "0013":
            later.unlink()
    return before


async def _fill(dsn: str, facts: int, pool: int) -> tuple[float, int]:
    conn = await asyncpg.connect(dsn)
    try:
        began = time.perf_counter()
        await conn.execute(FILL_POOL, pool, DIM)
        await conn.execute(FILL_FACTS, facts, facts // TYPICAL_FACTS, MODEL, pool)
        await conn.execute("VACUUM (ANALYZE) memory_fact")
        await conn.execute("CHECKPOINT")
        size: int = await conn.fetchval(
            "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class AS c"
            " WHERE c.relname = 'memory_fact' OR c.relname LIKE 'memory\\_fact\\_p%'")
        return time.perf_counter() - began, size
    finally:
        await conn.close()


def _commit(user: str, cursor_version: int, user_version: int, target: int,
            embeddings: Vector, n: int) -> RunCommit:
    writes = tuple(InsertFact(ref=i, text=f"new fact {n}.{i}", category="fact", importance=5,
                              embedding=embeddings[i]) for i in range(NEW_FACTS))
    now = datetime.now(UTC)
    return RunCommit(
        cursor=CursorAdvance(session_id="bench", user_id=user, expected_version=cursor_version,
                             last_hash=f"h{n}", window_hash=f"w{n}", position=n, processed=1,
                             user_turns=1),
        user_version=user_version, writes=(*writes, SupersedeFact(ExistingRow(target))),
        observed_at=now, embedding_model=MODEL, source_session_id="bench",
        run=RunRecord(job_id=f"bench-{n}", job_try=1, session_id="bench", user_id=user,
                      outcome="committed", started_at=now))


async def _measure(dsn: str, users: int, args: argparse.Namespace) -> list[str]:
    pool = await create_pool(dsn, min_size=1, max_size=1, server_settings=GENERIC_PLANS,
                             reset=False)
    store = PostgresStore(pool, FenceKeys(b"bench-partitions-fence-key-32byte"))
    rng = np.random.default_rng(args.seed)
    pick = random.Random(args.seed)
    try:
        commits: list[float] = []
        for n in range(args.commits):
            user = f"user-{pick.randrange(users):07d}"
            found = await store.neighbors(user, _unit(rng, 1), K, model=MODEL)
            cursor = (await store.load_session(user, "bench")).cursor
            target = found.rows[0][0].id
            commit = _commit(user, cursor.version if cursor else 0, found.version, target,
                             _unit(rng, NEW_FACTS), n)
            began = time.perf_counter()
            await store.commit_run(commit)
            commits.append((time.perf_counter() - began) * 1000)
        neighbours: list[float] = []
        for _ in range(args.queries):
            user = f"user-{pick.randrange(users):07d}"
            matrix = _unit(rng, CANDIDATES)
            began = time.perf_counter()
            found = await store.neighbors(user, matrix, K, model=MODEL)
            neighbours.append((time.perf_counter() - began) * 1000)
            if not all(len(rows) == K for rows in found.rows):
                raise RuntimeError(f"{user}: fewer than {K} neighbours")
    finally:
        await pool.close()
    conn = await asyncpg.connect(dsn)
    try:
        # Dead rows spread over every user: 1 row in DEAD_EVERY superseded (a new
        # version of the row, the old one dead), as a day of consolidation leaves them.
        await conn.execute(DEAD_ROWS, 0, DEAD_EVERY)
        began = time.perf_counter()
        await conn.execute("VACUUM memory_fact")
        vacuum_s = time.perf_counter() - began
        # What one (auto)vacuum worker takes on at once: the whole table, or one partition.
        await conn.execute(DEAD_ROWS, 1, DEAD_EVERY)
        unit = await conn.fetchval(
            "SELECT coalesce(max(c.relname::text), 'memory_fact') FROM pg_inherits AS i"
            " JOIN pg_class AS c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'memory_fact'::regclass AND c.relkind = 'r'")
        began = time.perf_counter()
        await conn.execute(f"VACUUM {unit}")
        unit_s = time.perf_counter() - began
        began = time.perf_counter()
        await conn.execute("ANALYZE memory_fact")
        analyze_s = time.perf_counter() - began
    finally:
        await conn.close()
    return [ms(pct(commits, 50)), ms(pct(commits, 95)), ms(pct(neighbours, 50)),
            ms(pct(neighbours, 95)), f"{vacuum_s:.1f}", f"{unit} {unit_s:.2f}",
            f"{analyze_s:.1f}"]


async def _bench(args: argparse.Namespace, url: str, root: Path) -> tuple[list[list[str]], float]:
    base = url.rsplit("/", 1)[0]
    admin = await asyncpg.connect(url)
    try:
        for name in ("bench_flat", "bench_partitioned"):
            await admin.execute(f"CREATE DATABASE {name}")
    finally:
        await admin.close()
    flat, parted = f"{base}/bench_flat", f"{base}/bench_partitioned"
    await migrate(flat, embed_dim=DIM, schema_dir=_schema_before(root))
    await migrate(parted, embed_dim=DIM, pg_partitions=args.partitions)
    users = args.facts // TYPICAL_FACTS
    rows = []
    for label, dsn in (("unpartitioned (0012)", flat),
                       (f"{args.partitions} hash partitions (0013)", parted)):
        fill_s, size = await _fill(dsn, args.facts, args.pool)
        print(f"  {label}: filled in {fill_s:.0f} s", file=sys.stderr, flush=True)
        rows.append([label, f"{size / 2**20:,.0f}", f"{fill_s:.0f}",
                     *await _measure(dsn, users, args)])
        print(f"  {label}: measured", file=sys.stderr, flush=True)
    # The upgrade itself: 0013 on the filled unpartitioned database (its lock's length).
    began = time.perf_counter()
    await migrate(flat, embed_dim=DIM, pg_partitions=args.partitions)
    return rows, time.perf_counter() - began


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    free = shutil.disk_usage(tempfile.gettempdir()).free
    # Two tables, then the upgrade's copy beside the old one: four at the peak.
    if 4 * args.facts * BYTES_PER_FACT > free:
        print(f"--facts {args.facts:,} needs about"
              f" {4 * args.facts * BYTES_PER_FACT / 2**30:.1f} GiB at the peak, more than the"
              f" {free / 2**30:.1f} GiB free in {tempfile.gettempdir()}")
        return 2
    began = time.perf_counter()
    with throwaway_servers(durable=False) as servers:
        rows, migrate_s = asyncio.run(_bench(args, servers.database_url, servers.root))
    print(f"# The fact table unpartitioned and partitioned by user ({os.cpu_count()} CPUs;"
          " this machine's times)")
    print()
    print(f"- PostgreSQL embedded, durable=False, shared_buffers={SHARED_BUFFERS};"
          f" {args.facts:,} facts in each database, {args.facts // TYPICAL_FACTS:,} users of"
          f" {TYPICAL_FACTS} facts, rows interleaved; embeddings random unit halfvec({DIM})")
    print(f"- commit: `PostgresStore.commit_run`, {NEW_FACTS} new facts and 1 supersession,"
          f" {args.commits} users at random; neighbours: `PostgresStore.neighbors`,"
          f" {CANDIDATES} candidates, k={K}, {args.queries} users at random")
    print(f"- wall time {time.perf_counter() - began:.0f} s")
    print()
    print(table(["fact table", "MiB", "fill s", "commit p50 ms", "commit p95 ms",
                 "neighbours p50 ms", "neighbours p95 ms", "VACUUM s",
                 "VACUUM of one unit s", "ANALYZE s"], rows))
    print()
    print(f"0013 on the unpartitioned database ({args.partitions} partitions, every row"
          f" copied, keys checked, analyzed): {migrate_s:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
