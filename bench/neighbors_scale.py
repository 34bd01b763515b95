"""The neighbour query as the fact table grows: flat in the table's size, or not.

Throwaway PostgreSQL (durable=False, bench.lib.servers' shared_buffers), the real
schema, filled straight in SQL to each size in turn (default 10,000, then
100,000, then 1,000,000 facts): typical users of 200 active facts, and one
heavy user of 5,000. Rows are written interleaved across the users of each
step, as facts arriving over time would be, so one user's rows lie on many
heap pages (the worst layout for the per-user scan, not the best).

Embeddings are random unit halfvecs at 1536 dimensions, drawn once into a pool
of ``--pool`` vectors that rows take by a hash of their id: an exact scan
costs the same whatever the values, and drawing 1,536 random numbers for each
of a million rows in SQL would take most of the run.

At each size the query is ``PostgresStore.neighbors`` itself, on a pool built
as the worker's (generic plans, binary halfvec codec): 10 candidates, k=5,
for ``--queries`` typical users picked at random (a different user each call,
so their pages are rarely in shared_buffers already), then as many calls for
the heavy user; and for 20 more typical users, the pages the query found in
shared_buffers and those it read from outside (EXPLAIN (ANALYZE, BUFFERS)).
Goal: the typical user's p50 flat from the smallest size to the largest.

    .venv/bin/python -m bench.neighbors_scale [--sizes 10000 100000 1000000]

1,000,000 rows take about 3.5 GB of disk in the temp dir: the bench checks the
free space first and stops at the last size that fits, saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence

import asyncpg
import numpy as np

from bench.lib.servers import SHARED_BUFFERS, throwaway_servers
from bench.lib.stats import ms, pct, table
from worker.store import halfvec, queries
from worker.store.migrate import migrate
from worker.store.pool import GENERIC_PLANS, create_pool
from worker.store.postgres import PostgresStore
from worker.vectors import Vector

DIM = 1536
MODEL = "bench-random"
TYPICAL_FACTS = 200
HEAVY_FACTS = 5000
HEAVY_USER = "heavy-user"
CANDIDATES = 10
K = 5
# Heap, indexes and WAL headroom per fact at 1536 dims, from this bench's table size, padded.
BYTES_PER_FACT = 4600
GOAL_RATIO = 1.5  # the largest size's typical p50 at most this times the smallest's


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.neighbors_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=300, help="calls per user kind and size")
    parser.add_argument("--pool", type=int, default=4096, help="distinct random embeddings")
    parser.add_argument("--seed", type=int, default=5)
    return parser.parse_args(argv)


def _fitting(sizes: Sequence[int]) -> tuple[list[int], str]:
    free = shutil.disk_usage(tempfile.gettempdir()).free
    # Half the free space at most: others share the disk.
    fits = [n for n in sizes if n * BYTES_PER_FACT < free / 2]
    dropped = [n for n in sizes if n not in fits]
    note = (f"free disk in {tempfile.gettempdir()}: {free / 2**30:.1f} GiB"
            + (f"; sizes {dropped} left out (they need about"
               f" {max(dropped) * BYTES_PER_FACT / 2**30:.1f} GiB, more than half of it)"
               if dropped else ""))
    return fits, note


FILL_POOL = """
CREATE TABLE bench_embedding AS
SELECT i AS slot,
       (SELECT (array_agg(x / norm))::real[]::halfvec
        FROM (SELECT x, sqrt(sum(x * x) OVER ()) AS norm
              FROM (SELECT random() * 2 - 1 AS x FROM generate_series(1, $2::int)
                    WHERE i >= 0) AS raw) AS scaled) AS embedding
FROM generate_series(0, $1::int - 1) AS i
"""

# Rows $1 .. $2 of the table, interleaved over the users they name: typical user
# number (row mod users) + first, or the heavy user for the rows given to it.
FILL_FACTS = """
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at, source_kind)
SELECT CASE WHEN r % $5::int = 0 AND r / $5::int < $6::int THEN 'heavy-user'
            ELSE 'user-' || lpad(($3::int + r % $4::int)::text, 7, '0') END,
       'fact ' || r, 'fact', 5, e.embedding, $7, now(), 'backfill'
FROM generate_series($1::bigint, $2::bigint) AS r
JOIN bench_embedding AS e ON e.slot = abs(hashint8(r)) % $8::int
"""


async def _grow(conn: asyncpg.Connection, have: int, size: int, next_user: int,
                heavy_left: int, pool: int) -> tuple[int, int]:
    """Rows up to ``size``; the typical users added and the heavy rows still to place."""
    rows = size - have
    heavy = min(heavy_left, rows // 2)
    users = (rows - heavy) // TYPICAL_FACTS
    # Every `stride`-th row is the heavy user's while it has rows left to place.
    stride = max(2, rows // heavy) if heavy else rows + 1
    await conn.execute(FILL_FACTS, 0, rows - 1, next_user, max(users, 1), stride, heavy,
                       MODEL, pool)
    await conn.execute("VACUUM (ANALYZE) memory_fact")
    await conn.execute("CHECKPOINT")
    return next_user + users, heavy_left - heavy


def _candidates(rng: np.random.Generator) -> Vector:
    raw = rng.standard_normal((CANDIDATES, DIM)).astype(np.float32)
    unit: Vector = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    return unit


async def _time(store: PostgresStore, users: Sequence[str],
                rng: np.random.Generator) -> list[float]:
    out = []
    for user in users:
        matrix = _candidates(rng)
        started = time.perf_counter()
        found = await store.neighbors(user, matrix, K, model=MODEL)
        out.append((time.perf_counter() - started) * 1000)
        if not all(len(rows) == K for rows in found.rows):
            raise RuntimeError(f"{user}: fewer than {K} neighbours")
    return out


async def _pages(conn: asyncpg.Connection, users: Sequence[str],
                 rng: np.random.Generator) -> tuple[float, float]:
    """Mean shared buffers hit and read (from outside shared_buffers) per query."""
    sql = queries.load("pipeline")["neighbors"]
    hit = read = 0
    for user in users:
        plan = await conn.fetchval(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", user,
            halfvec.encode_rows(_candidates(rng)), K, [None] * CANDIDATES, MODEL, DIM)
        top = json.loads(plan)[0]["Plan"]
        hit += top["Shared Hit Blocks"]
        read += top["Shared Read Blocks"]
    return hit / len(users), read / len(users)


async def _bench(args: argparse.Namespace, dsn: str, sizes: Sequence[int]) -> list[list[str]]:
    await migrate(dsn, embed_dim=DIM)
    conn = await asyncpg.connect(dsn)
    await conn.set_type_codec("halfvec", encoder=halfvec.encode, decoder=bytes,
                              format="binary")
    pool = await create_pool(dsn, min_size=1, max_size=1, server_settings=GENERIC_PLANS,
                             reset=False)
    store = PostgresStore(pool)
    rng = np.random.default_rng(args.seed)
    pick = random.Random(args.seed)
    rows: list[list[str]] = []
    try:
        await conn.execute(FILL_POOL, args.pool, DIM)
        have, next_user, heavy_left = 0, 0, HEAVY_FACTS
        for size in sizes:
            began = time.perf_counter()
            next_user, heavy_left = await _grow(conn, have, size, next_user, heavy_left,
                                                args.pool)
            have = size
            fill_s = time.perf_counter() - began
            counts = await conn.fetchrow(
                "SELECT count(*) AS n, count(*) FILTER (WHERE user_id = $1) AS heavy,"
                " pg_total_relation_size('memory_fact') AS bytes FROM memory_fact", HEAVY_USER)
            typical = [f"user-{pick.randrange(next_user):07d}" for _ in range(args.queries)]
            await _time(store, typical[:20], rng)  # prepared statement, plan cache
            times = await _time(store, typical, rng)
            heavy = await _time(store, [HEAVY_USER] * args.queries, rng)
            others = [f"user-{pick.randrange(next_user):07d}" for _ in range(20)]
            hit, read = await _pages(conn, others, rng)
            rows.append([f"{counts['n']:,}", f"{next_user:,}", f"{counts['heavy']:,}",
                         f"{counts['bytes'] / 2**20:,.0f}", f"{fill_s:.0f}",
                         ms(pct(times, 50)), ms(pct(times, 95)),
                         ms(pct(heavy, 50)), ms(pct(heavy, 95)), f"{hit:.0f} / {read:.0f}"])
            print(f"  {size:,} facts done", file=sys.stderr, flush=True)
    finally:
        await pool.close()
        await conn.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    sizes, disk_note = _fitting(sorted(args.sizes))
    if not sizes:
        print(f"no size fits: {disk_note}")
        return 1
    began = time.perf_counter()
    with throwaway_servers(durable=False) as servers:
        rows = asyncio.run(_bench(args, servers.database_url, sizes))
    print(f"# The neighbour query as the table grows ({os.cpu_count()} CPUs; this machine's"
          " times)")
    print()
    print(f"- PostgreSQL embedded, durable=False, shared_buffers={SHARED_BUFFERS}; {disk_note}")
    print(f"- `PostgresStore.neighbors`, {CANDIDATES} candidates, k={K}, embeddings random unit"
          f" halfvec({DIM}) from a pool of {args.pool}; {args.queries} calls per user kind and"
          f" size, typical users ({TYPICAL_FACTS} active facts) picked at random; every row"
          " active, users' rows interleaved")
    print(f"- wall time {time.perf_counter() - began:.0f} s")
    print()
    print(table(["facts in the table", "typical users", "heavy user's facts", "table MiB",
                 "fill s", "typical p50 ms", "typical p95 ms", "heavy p50 ms",
                 "heavy p95 ms", "typical pages hit / read"], rows))
    print()
    first, last = float(rows[0][5]), float(rows[-1][5])
    verdict = "meets" if last <= GOAL_RATIO * first else "MISSES"
    print(f"Goal: the typical user's p50 flat in the table's size (at {rows[-1][0]} facts at"
          f" most {GOAL_RATIO:g} x its p50 at {rows[0][0]}): {last:g} ms vs {first:g} ms,"
          f" {last / first:.2f} x ({verdict} it).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
