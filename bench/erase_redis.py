"""What one user's erase costs everyone else: Redis time per erase, and other users'
hand-over latency while one user erases in a loop, by how many jobs are queued.

Throwaway Redis. ``--jobs`` real hand-overs (worker.protocol.queue.enqueue) of as
many other users, one session each: their jobs queued, their sessions in the
pending and waiting sets. Then:

1. ``--erases`` erases (worker.protocol.queue.erase_user) of users with one job
   each: the client's wall time, and Redis's own time in the erase script
   (``INFO commandstats``' EVALSHA usec, reset before each erase).
2. For ``--seconds``: ``--loops`` loops erasing one user again and again (one
   token's ``DELETE /users/{u}`` with no rate in the way: the script's cost alone)
   while ``--clients`` other users hand over one after another
   (worker.client.schedule_memory_persistence, each a new user and session), and
   the same without the erase loops: the hand-overs' latency percentiles and how
   many failed (the client gives up after 1 s).

    .venv/bin/python -m bench.erase_redis [--jobs 100000] [--erases 5] [--loops 4]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.lib.stats import pct
from worker.client.handover import schedule_memory_persistence
from worker.embedded import EmbeddedRedis
from worker.protocol import keys, queue
from worker.protocol.keys import SessionRef

_BATCH = 500  # hand-overs in flight while filling


async def _fill(redis: Redis, jobs: int) -> None:
    await redis.flushall()
    for start in range(0, jobs, _BATCH):
        await asyncio.gather(*(
            queue.enqueue(redis, SessionRef(f"other{i}", "1"), payload=b'{"messages":[]}')
            for i in range(start, min(jobs, start + _BATCH))))


async def _script_usec(redis: Redis) -> tuple[int, int]:
    """EVALSHA's calls and usec since the last CONFIG RESETSTAT."""
    stats = await redis.info("commandstats")
    evalsha = stats.get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return int(evalsha["calls"]), int(evalsha["usec"])


async def _erase_times(redis: Redis, erases: int) -> None:
    walls, servers = [], []
    await queue.erase_user(redis, "nobody")  # the script loaded: EVALSHA finds it
    for k in range(erases):
        user = f"erased{k}"
        await queue.enqueue(redis, SessionRef(user, "1"), payload=b'{"messages":[]}')
        await redis.config_resetstat()
        started = time.perf_counter()
        cleared = await queue.erase_user(redis, user)
        walls.append((time.perf_counter() - started) * 1000)
        calls, usec = await _script_usec(redis)
        assert calls == 1 and cleared.jobs == 1, (calls, cleared)
        servers.append(usec / 1000)
    print(f"  erase, client ms: {[round(t, 2) for t in walls]}")
    print(f"  erase, Redis ms (EVALSHA usec): {[round(t, 3) for t in servers]}")


async def _hand_overs(url: str, client: int, stop: float, took: list[float],
                      failed: list[str]) -> None:
    redis = Redis.from_url(url)
    try:
        i = 0
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                await schedule_memory_persistence(
                    redis, "1", f"talker{client}-{i}",
                    [{"role": "user", "content": f"turn {i}"}])
            except Exception as exc:  # noqa: BLE001 - a bench counts every failure
                failed.append(type(exc).__name__)
            took.append((time.perf_counter() - started) * 1000)
            i += 1
    finally:
        await redis.aclose()


async def _erase_loop(url: str, user: str, stop: float, count: list[int]) -> None:
    redis = Redis.from_url(url)
    try:
        while time.monotonic() < stop:
            await queue.erase_user(redis, user)
            count[0] += 1
    finally:
        await redis.aclose()


async def _contention(url: str, loops: int, clients: int, seconds: float) -> None:
    for erasing in (0, loops):
        stop = time.monotonic() + seconds
        took: list[float] = []
        failed: list[str] = []
        erases = [0]
        await asyncio.gather(
            *(_hand_overs(url, c, stop, took, failed) for c in range(clients)),
            *(_erase_loop(url, "eraser", stop, erases) for _ in range(erasing)))
        summary: dict[str, Any] = {
            "hand-overs": len(took), "p50 ms": round(pct(took, 50), 2),
            "p99 ms": round(pct(took, 99), 2), "max ms": round(max(took), 2),
            "failed": len(failed), "erases": erases[0]}
        print(f"  {erasing} erase loops, {clients} hand-over clients, {seconds:.0f} s: {summary}")


async def _bench(url: str, sizes: Sequence[int], erases: int, loops: int, clients: int,
                 seconds: float) -> None:
    redis = Redis.from_url(url)
    try:
        for jobs in sizes:
            await _fill(redis, jobs)
            print(f"{jobs} queued jobs of other users ({await redis.zcard(keys.DEFAULT_QUEUE)}"
                  " in the queue):")
            await _erase_times(redis, erases)
            if seconds > 0:
                await _contention(url, loops, clients, seconds)
    finally:
        await redis.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100_000])
    parser.add_argument("--erases", type=int, default=5)
    parser.add_argument("--loops", type=int, default=4, help="erase loops at once")
    parser.add_argument("--clients", type=int, default=4, help="hand-over clients at once")
    parser.add_argument("--seconds", type=float, default=15.0,
                        help="each contention run (0: none)")
    args = parser.parse_args(argv)
    server = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="memfleet-bench-")) / "redis")
    url = server.start()
    try:
        asyncio.run(_bench(url, args.jobs, args.erases, args.loops, args.clients,
                           args.seconds))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
