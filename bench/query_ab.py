"""Interleaved A/B of the neighbour query: the shipped one against another version.

Whole ``make bench`` runs cannot tell apart changes under a millisecond on this
VM: its speed drifts by a quarter over minutes (docs/bench.md). Here both
versions run in one process against one database, in a random order within
every round, so a slow phase slows both alike; each round also checks that they
return the same rows.

    git show REV:worker/store/sql/pipeline.sql > /tmp/old.sql
    .venv/bin/python -m bench.query_ab --against /tmp/old.sql [--rounds 600]

The database is the bench's (200 users x 200 active facts, halfvec(1536)),
churned the way jobs churn it: a sixth of the rows superseded, each by a
successor appended at the end of the table, so a user's active rows are spread
over more pages than right after seeding. Candidates are the bench sessions'
own ten embeddings each.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import workload
from bench.phases import plan_candidates
from bench.seed import prepare_database
from bench.servers import throwaway_servers
from bench.stats import dist_cells, table
from worker.config import Settings
from worker.providers.hashing import HashingEmbedder
from worker.store import halfvec
from worker.store.pool import GENERIC_PLANS, create_pool
from worker.store.queries import load, parse_queries

EMBED_DIM = 1536
K = 5

# A sixth of the seeded rows superseded by a successor appended at the end of
# the table, as jobs do.
_APPEND_SUCCESSORS = (
    "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
    " embedding_model, observed_at, source_session_id, source_kind)"
    " SELECT user_id, text || ' (restated)', category, importance, embedding,"
    " embedding_model, observed_at, source_session_id, source_kind"
    " FROM memory_fact WHERE id % 6 = 0 ORDER BY id"
)
_SUPERSEDE = "UPDATE memory_fact SET superseded_at = now() WHERE id % 6 = 0 AND id <= $1"


async def _candidates(plans: Sequence[workload.SessionPlan]) -> list[tuple[str, Any]]:
    """(user id, its session's ten candidate embeddings, encoded) per plan."""
    embedder = HashingEmbedder(EMBED_DIM)
    now = datetime.now(UTC)
    out = []
    for plan in plans:
        _, embeddings = await plan_candidates(plan, embedder, Settings().context_messages, now)
        out.append((plan.user_id, halfvec.encode_rows(embeddings)))
    return out


async def _measure(dsn: str, queries: dict[str, str], rounds: int, seed: int,
                   cases: list[tuple[str, Any]]) -> dict[str, list[float]]:
    pool = await create_pool(dsn, min_size=1, max_size=1, server_settings=GENERIC_PLANS)
    rng = random.Random(seed)
    times: dict[str, list[float]] = {name: [] for name in queries}
    try:
        for i in range(rounds):
            user, embeddings = cases[i % len(cases)]
            order = list(queries)
            rng.shuffle(order)
            seen = {}
            for name in order:
                started = time.perf_counter()
                rows = await pool.fetch(queries[name], user, embeddings, K)
                times[name].append((time.perf_counter() - started) * 1000)
                seen[name] = [tuple(row) for row in rows]
            if len({repr(rows) for rows in seen.values()}) != 1:
                raise SystemExit(f"the versions disagree for {user}: not the same query")
    finally:
        await pool.close()
    return times


async def _run(args: argparse.Namespace) -> str:
    queries = {
        "shipped": load("pipeline")["neighbors"],
        str(args.against): parse_queries(args.against.read_text())["neighbors"],
    }
    plans = list(workload.sessions(args.seed, args.users, args.users))
    cases = await _candidates(plans)
    with throwaway_servers(durable=True) as servers:
        await prepare_database(servers.database_url, seed=args.seed, users=args.users,
                               plans=plans, embed_dim=EMBED_DIM)
        pool = await create_pool(servers.database_url, min_size=1, max_size=1)
        try:
            seeded = await pool.fetchval("SELECT max(id) FROM memory_fact")
            await pool.execute(_APPEND_SUCCESSORS)
            await pool.execute(_SUPERSEDE, seeded)
        finally:
            await pool.close()
        # The first rounds warm caches and plans for both; they are not counted.
        times = await _measure(servers.database_url, queries, args.rounds + args.warmup,
                               args.seed, cases)
    rows = [[name, *dist_cells(samples[args.warmup:])] for name, samples in times.items()]
    return table(["neighbour query", "p50 ms", "p95 ms", "p99 ms", "mean ms", "n"], rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path, required=True,
                        help="a pipeline.sql holding the other version's neighbors query")
    parser.add_argument("--rounds", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    print(asyncio.run(_run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
