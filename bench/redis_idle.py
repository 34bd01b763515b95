"""What Redis keeps for a session once it is idle and fully processed.

Throwaway PostgreSQL (durable=False) and Redis; offline providers (rules +
hashing, a small embed_dim: the bytes in Redis do not depend on it). Hands
over ``--sessions`` sessions (``--users`` users, each session a conversation of
``--turns`` user turns with one fact each, and the assistant's replies), lets
in-process burst workers drain the queue, and then reads Redis: used_memory
against an empty server's, the keys left by kind with their total MEMORY USAGE,
and so the bytes and keys per idle session. Goal: no message snapshot left for
an idle, fully processed session (``memfleet:handover:<session>`` gone).

    .venv/bin/python -m bench.redis_idle [--sessions 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from collections.abc import Sequence

from redis.asyncio import Redis

from bench.lib.servers import throwaway_servers
from bench.lib.stats import table
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.app import drain_queue, new_event_loop
from worker.protocol.keys import HANDOVER_PREFIX
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

DIM = 64


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_idle", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=4, help="user turns per session")
    return parser.parse_args(argv)


def _messages(session: int, turns: int) -> list[dict[str, str]]:
    out = []
    for turn in range(turns):
        out.append({"role": "user", "content": f"I use tool{session}x{turn}. Could you help me"
                    f" plan the rest of my week around it? (turn {turn})"})
        out.append({"role": "assistant", "content": "Of course: here is a plan for the week,"
                    f" day by day, with time set aside for tool{session}x{turn}."})
    return out


def _kind(key: bytes) -> str:
    """The key's prefix: its name up to the part that names a session, job or user."""
    text = key.decode(errors="replace")
    parts = text.split(":")
    return ":".join(parts[:2]) if len(parts) > 2 else text


async def _keys(redis: Redis) -> tuple[Counter[str], Counter[str]]:
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    async for key in redis.scan_iter(count=1000):
        kind = _kind(key)
        counts[kind] += 1
        sizes[kind] += int(await redis.memory_usage(key) or 0)
    return counts, sizes


async def _bench(args: argparse.Namespace, database_url: str, redis_url: str
                 ) -> tuple[list[str], list[list[str]], bool]:
    settings = Settings(database_url=database_url, redis_url=redis_url,
                        llm_provider="rules", embed_provider="hashing", embed_dim=DIM)
    telemetry = setup_telemetry(settings)
    redis = Redis.from_url(redis_url)
    try:
        await migrate(database_url, embed_dim=DIM)
        empty = int((await redis.info("memory"))["used_memory"])
        began = time.perf_counter()
        for n in range(args.sessions):
            await schedule_memory_persistence(redis, f"s{n}", f"u{n % args.users}",
                                              _messages(n, args.turns))
        handed = int((await redis.info("memory"))["used_memory"])
        print(f"{args.sessions} sessions handed over; draining ...", file=sys.stderr)
        await drain_queue(settings, telemetry=telemetry)
        drained_s = time.perf_counter() - began
        idle = int((await redis.info("memory"))["used_memory"])
        counts, sizes = await _keys(redis)
    finally:
        await redis.aclose()
        telemetry.shutdown()
    per = args.sessions
    snapshot_kind = HANDOVER_PREFIX.rstrip(":")
    notes = [
        f"- {args.sessions} sessions over {args.users} users, {args.turns} user turns each"
        f" (one fact a turn) and the replies; handed over and drained in {drained_s:.0f} s",
        f"- used_memory: empty {empty:,} B; all handed over {handed:,} B"
        f" ({(handed - empty) / per:,.0f} B a session); idle, every session processed"
        f" {idle:,} B ({(idle - empty) / per:,.0f} B a session)",
    ]
    rows = [[kind, f"{counts[kind]:,}", f"{counts[kind] / per:.2f}", f"{sizes[kind]:,}",
             f"{sizes[kind] / per:,.0f}"] for kind in sorted(counts)]
    rows.append(["all", f"{sum(counts.values()):,}", f"{sum(counts.values()) / per:.2f}",
                 f"{sum(sizes.values()):,}", f"{sum(sizes.values()) / per:,.0f}"])
    return notes, rows, counts[snapshot_kind] == 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    configure_logging("WARNING")
    with throwaway_servers(durable=False) as servers, \
            asyncio.Runner(loop_factory=new_event_loop) as runner:
        notes, rows, clean = runner.run(_bench(args, servers.database_url, servers.redis_url))
    print("# Redis bytes per idle, fully processed session")
    print()
    print(*notes, sep="\n")
    print()
    print(table(["keys left", "keys", "per session", "MEMORY USAGE B", "B per session"], rows))
    print()
    print(f"Goal: no message snapshot ({HANDOVER_PREFIX}<session>) left for an idle, fully"
          f" processed session: {'PASS' if clean else 'FAIL'}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
