"""Right of access at size: the export of a user with N facts, each with its history,
streamed (worker.ops.access_export) against everything read at once; time and memory.

    python -m bench.export_memory [--facts 10000]

The user gets N facts, each superseded once (2N rows, N chains), N audit rows and
20 sessions. Memory is Python's peak allocation while the export runs (tracemalloc)
and the process's peak RSS growth; "all at once" fetches every row into lists and
dumps one JSON string, the way an unstreamed endpoint would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from bench.lib.servers import throwaway_servers
from worker.ops.access_export import export_user
from worker.store import queries
from worker.store.maintenance import PostgresMaintenanceStore
from worker.store.migrate import migrate
from worker.store.pool import create_pool

DIM = 256
USER = "heavy"


async def seed(pool: Any, facts: int) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
            " embedding_model, observed_at, source_session_id)"
            " SELECT $1, 'Fact number ' || n || ', said in so many words', 'fact', 5,"
            " array_fill(0.1::real, ARRAY[$2::int])::halfvec, 'bench', now(), 's' || n % 20"
            " FROM generate_series(1, $3::int * 2) AS n", USER, DIM, facts)
        # Each odd row superseded by the next one: N chains of two rows.
        await conn.execute(
            "UPDATE memory_fact AS old SET superseded_at = now(), superseded_by = old.id + 1"
            " WHERE user_id = $1 AND old.id % 2 = 1", USER)
        await conn.execute(
            "INSERT INTO memory_run (job_id, session_id, user_id, outcome, slice_first_hash,"
            " slice_last_hash, slice_len, added, started_at)"
            " SELECT 'j' || n, 's' || n % 20, $1, 'committed', md5(n::text), md5(n::text),"
            " 2, 1, now() FROM generate_series(1, $2::int) AS n", USER, facts)
        await conn.execute(
            "INSERT INTO session_cursor (session_id, user_id, version, last_hash, window_hash,"
            " position, summary) SELECT 's' || n, $1, 1, 'h', 'w', 0, 'a summary'"
            " FROM generate_series(0, 19) AS n", USER)


async def streamed(pool: Any) -> int:
    size = 0
    async for chunk in export_user(PostgresMaintenanceStore(pool), USER, memory_default=True):
        size += len(chunk)
    return size


async def all_at_once(pool: Any) -> int:
    sql = queries.load("export")
    async with pool.acquire() as conn:
        parts = {name: [dict(r) for r in await conn.fetch(sql[name], USER)]
                 for name in ("facts", "sessions", "runs")}
    return len(json.dumps({"user_id": USER, **parts}, default=str))


async def measure(run: Callable[[Any], Awaitable[int]], pool: Any) -> tuple[float, float, int]:
    tracemalloc.start()
    started = time.perf_counter()
    size = await run(pool)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak / 2**20, size


async def main(facts: int) -> None:
    with throwaway_servers(durable=False) as servers:
        await migrate(servers.database_url, embed_dim=DIM)
        pool = await create_pool(servers.database_url, min_size=1, max_size=2)
        try:
            await seed(pool, facts)
            await streamed(pool)  # warm the caches for both
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            rows = []
            for name, run in (("streamed (worker.ops.access_export)", streamed),
                              ("all at once", all_at_once)):
                elapsed, peak_mb, size = await measure(run, pool)
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                rows.append((name, elapsed, peak_mb, (rss - rss_before) / 1024, size))
                rss_before = rss
        finally:
            await pool.close()
    print(f"export of one user: {facts} facts with one older version each "
          f"({2 * facts} rows), {facts} runs, 20 sessions")
    print("| way | time | Python peak | peak RSS growth | JSON |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, elapsed, peak_mb, rss_mb, size in rows:
        print(f"| {name} | {elapsed * 1000:.0f} ms | {peak_mb:.1f} MiB | {rss_mb:.1f} MiB |"
              f" {size / 2**20:.1f} MiB |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10_000)
    asyncio.run(main(parser.parse_args().facts))
