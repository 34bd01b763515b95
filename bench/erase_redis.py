"""How long an erase's Redis script holds Redis, by how many jobs are queued.

The erase (worker/protocol/lua/erase_user.lua) finds the user's queued ARQ jobs by one
pass over the queue (job ids are random), and the user's pending and waiting
entries by a ZSCAN of each set; Redis runs nothing else meanwhile. Throwaway
Redis; ``--jobs`` queued jobs of as many other users (one session each, in the
pending and waiting sets too), then ``--erases`` erases of users with one job
each: the script's wall time per erase, as the client sees it.

    .venv/bin/python -m bench.erase_redis [--jobs 10000 100000] [--erases 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from redis.asyncio import Redis

from worker.embedded import EmbeddedRedis
from worker.protocol import keys, queue
from worker.protocol.session_ref import SessionRef


async def _fill(redis: Redis, jobs: int) -> None:
    await redis.flushall()
    pipe = redis.pipeline(transaction=False)
    for i in range(jobs):
        job_id, session = f"memfleet-{i:032x}", SessionRef(f"user{i}", "1")
        pipe.set(keys.ARQ_JOB_PREFIX + job_id, queue.job_bytes(session, 1))
        pipe.zadd(keys.DEFAULT_QUEUE, {job_id: i})
        pipe.zadd(keys.pending_key(keys.DEFAULT_QUEUE), {session.key: i})
        pipe.zadd(keys.waiting_key(keys.DEFAULT_QUEUE), {session.key: i})
    await pipe.execute()


async def _bench(url: str, sizes: Sequence[int], erases: int) -> None:
    redis = Redis.from_url(url)
    try:
        for jobs in sizes:
            await _fill(redis, jobs)
            took = []
            for k in range(erases):
                started = time.perf_counter()
                cleared = await queue.erase_user(redis, f"user{k * 7}")
                took.append((time.perf_counter() - started) * 1000)
                assert cleared.jobs == 1, cleared
            print(f"{jobs} queued jobs: erase script ms {[round(t, 1) for t in took]}")
    finally:
        await redis.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--erases", type=int, default=3)
    args = parser.parse_args(argv)
    server = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="memfleet-bench-")) / "redis")
    url = server.start()
    try:
        asyncio.run(_bench(url, args.jobs, args.erases))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
