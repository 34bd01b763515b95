"""`memfleet reembed` throughput: facts moved per second, and how long one move takes.

A throwaway embedded PostgreSQL (durable) migrated at 1536 dimensions, seeded with
``--users`` users of ``--facts`` active facts each on text-embedding-3-small; then
`memfleet reembed --model text-embedding-3-large --dim 1024` as a real process,
against the OpenAI-compatible stub over HTTP (``--provider openai``, the stub
embeds by hashing, so the model's own time is not in the figure) or the hashing
embedder in-process of the command (``--provider hashing``, model hashing-v1).

    .venv/bin/python -m bench.reembed [--users 1000] [--facts 20] [--batch 128]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

import asyncpg

from api_stub.llm_stub import StubServer
from bench.lib.servers import throwaway_servers
from worker.store.migrate import migrate

OLD_DIM = 1536
SEED = """
INSERT INTO memory_fact (user_id, text, category, importance, embedding, embedding_model,
                         observed_at)
SELECT 'user-' || u, 'User ' || u || ' said fact ' || f || ' about topic ' || (u * 31 + f),
       'fact', 5, array_fill(0.02::real, ARRAY[$3::integer])::vector::halfvec, $4, now()
FROM generate_series(1, $1::integer) AS u, generate_series(1, $2::integer) AS f
"""


async def _seed(url: str, users: int, facts: int, model: str) -> None:
    await migrate(url, embed_dim=OLD_DIM)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(SEED, users, facts, OLD_DIM, model)
        await conn.execute("ANALYZE memory_fact")
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--facts", type=int, default=20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--provider", choices=["openai", "hashing"], default="openai")
    args = parser.parse_args(argv)
    old, new, dim = "text-embedding-3-small", "text-embedding-3-large", 1024
    if args.provider == "hashing":
        old = new = "hashing-v1"
    with throwaway_servers(durable=True) as servers, StubServer(dim=OLD_DIM) as stub:
        asyncio.run(_seed(servers.database_url, args.users, args.facts, old))
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
        env.update(MEMFLEET_DATABASE_URL=servers.database_url,
                   MEMFLEET_REDIS_URL=servers.redis_url, MEMFLEET_EMBED_DIM=str(OLD_DIM),
                   MEMFLEET_EMBED_PROVIDER=args.provider, MEMFLEET_EMBED_MODEL=old,
                   MEMFLEET_EMBED_BASE_URL=stub.v1)
        command = [sys.executable, "-m", "worker.cli", "reembed", "--model", new,
                   "--dim", str(dim), "--batch", str(args.batch)]
        started = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True,  # noqa: S603
                              check=False)
        wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"reembed failed: {done.stderr.strip().splitlines()[-1]}")
    total = args.users * args.facts
    print(done.stdout.strip())
    print(f"{args.provider}: {total} facts of {args.users} users, batch {args.batch}:"
          f" {wall:.1f} s wall clock including the process start, {total / wall:.0f} facts/s,"
          f" {args.users / wall:.0f} users/s")


if __name__ == "__main__":
    main()
