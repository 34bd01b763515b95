"""Interleaved A/B of the hand-over call: this checkout's client against another revision's.

The chat server's cost of one `schedule_memory_persistence` call, with nothing
else running: one process per revision (its checkout first on PYTHONPATH)
hands ``--messages``-long lists over to the same throwaway Redis, a block of
``--calls`` at a time, each session's list one message longer than the last
(as turns come). Blocks alternate, in a random order per round, so a slow
phase of the VM slows both sides alike. The report gives each side's p50 and
p99 over all calls and the median of the per-round differences of p50.

    .venv/bin/python -m bench.ab.handover_ab --against REV [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from worker.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]

_TIMER = """
import asyncio, json, sys, time
from redis.asyncio import Redis
from worker.client.handover import schedule_memory_persistence

async def main(url, calls, messages, tag):
    redis = Redis.from_url(url)
    said = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"turn {i}: " + "a sentence of an ordinary chat message. " * 4}
            for i in range(messages + calls)]
    took = []
    for n in range(calls):
        start = time.perf_counter()
        await schedule_memory_persistence(redis, f"{tag}-s{n % 20}", "u1",
                                          said[: messages + n // 20])
        took.append((time.perf_counter() - start) * 1e6)
    await redis.aclose()
    print(json.dumps(took))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
"""


def _block(checkout: Path, url: str, calls: int, messages: int, tag: str) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", _TIMER, url, str(calls), str(messages), tag],
                         env=env, cwd=checkout, capture_output=True, check=True, text=True)
    return [float(x) for x in json.loads(out.stdout.strip().splitlines()[-1])]


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--messages", type=int, default=40)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="memfleet-handover-ab-"))
    other = scratch / "other"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(other),
                    args.against], check=True, capture_output=True)
    redis = EmbeddedRedis(scratch / "redis")
    try:
        url = redis.start()
        sides = {"this checkout": ROOT, args.against: other}
        times: dict[str, list[float]] = {name: [] for name in sides}
        diffs = []
        rng = random.Random(5)
        for r in range(args.rounds):
            order = list(sides)
            rng.shuffle(order)
            p50 = {}
            for name in order:
                took = _block(sides[name], url, args.calls, args.messages, f"r{r}{name[:4]}")
                times[name] += took[20:]  # the first calls load the client and the script
                p50[name] = statistics.median(took[20:])
            diffs.append(p50["this checkout"] - p50[args.against])
    finally:
        redis.stop()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)],
                       capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"hand-over call, {args.messages}+ messages of about 180 characters,"
          f" {args.rounds} rounds x {args.calls} calls per side, one call at a time\n")
    print("| revision | p50 us | p99 us |")
    print("| --- | ---: | ---: |")
    for name, took in times.items():
        print(f"| {name} | {_p(took, 0.5):.0f} | {_p(took, 0.99):.0f} |")
    print(f"\nmedian of the per-round p50 differences (this checkout - {args.against}):"
          f" {statistics.median(diffs):+.0f} us (rounds: {', '.join(f'{d:+.0f}' for d in diffs)})")


if __name__ == "__main__":
    main()
