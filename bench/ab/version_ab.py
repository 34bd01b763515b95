"""Interleaved A/B of whole jobs: this checkout's worker against another revision's.

Whole ``make bench`` runs cannot resolve a change of a millisecond or two on
this VM: its speed drifts by a quarter over minutes (docs/bench.md). Here two
worker processes (bench.ab.ab_worker), one per revision, each with a database
and a Redis db of its own on the same PostgreSQL and Redis servers, seed the
same users and sessions through their own code; then the same session's
slice is handed over to both, one job at a time, each pair in a random order,
so a slow phase of the machine slows both alike. Each job is timed from its
own spans ("outside the LLM": the CONSUMER span less the gen_ai provider
calls), and the report gives each side's p50/p95 and the median of the paired
differences with a bootstrap 95% interval.

    .venv/bin/python -m bench.version_ab --against REV [--pairs 400]

REV is checked out in a temporary git worktree (removed at the end). Both
sides run this checkout's bench/ (copied to a temporary directory put first on
PYTHONPATH), so REV needs only the worker functions bench.lib.jobs calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import asyncpg
from redis.asyncio import Redis

from bench.ab.ab_worker import DONE_KEY, GO_KEY
from bench.lib import workload
from bench.lib.jobs import EMBED_DIM
from bench.lib.servers import Servers, throwaway_servers
from bench.lib.stats import dist_cells, ms, pct, table

ROOT = Path(__file__).resolve().parents[2]
JOB_WAIT_S = 60
SEED_WAIT_S = 1800
STAGES = ("lock", "cursor", "consolidate", "persist")


class Side(NamedTuple):
    redis: Any  # a redis.asyncio.Redis, whose commands redis-py types as sync-or-async
    proc: subprocess.Popen[bytes]


# A run's own erase fence key: the bench's databases are thrown away with it.
FENCE_KEY = secrets.token_hex(32)


def _worktree(rev: str, into: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), rev],
                   check=True, capture_output=True)
    # The editable install maps memfleet_schema to this checkout's schema/: the other
    # revision must migrate its own database with its own schema (its commit routine).
    (into / "memfleet_schema").symlink_to("schema", target_is_directory=True)


def _kit(into: Path) -> Path:
    """This checkout's bench/ package alone (its sources, subpackages included), to put
    before a checkout on PYTHONPATH."""
    for source in (ROOT / "bench").rglob("*.py"):
        target = into / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    return into


async def _databases(servers: Servers, count: int) -> list[str]:
    base = servers.database_url.rsplit("/", 1)[0]
    conn = await asyncpg.connect(servers.database_url)
    try:
        for n in range(count):
            await conn.execute(f"CREATE DATABASE memfleet_ab_{n}")
    finally:
        await conn.close()
    return [f"{base}/memfleet_ab_{n}" for n in range(count)]


def _start(checkout: Path, kit: Path, database_url: str, redis_url: str, home: Path,
           args: argparse.Namespace) -> subprocess.Popen[bytes]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")},
           "PYTHONPATH": f"{kit}{os.pathsep}{checkout}",
           "MEMFLEET_DATABASE_URL": database_url, "MEMFLEET_REDIS_URL": redis_url,
           "MEMFLEET_HOME_DIR": str(home), "MEMFLEET_LLM_PROVIDER": "rules",
           "MEMFLEET_EMBED_PROVIDER": "hashing", "MEMFLEET_EMBED_DIM": str(EMBED_DIM),
           # Both sides' fences under one key (revisions before issue 25 ignore it).
           "MEMFLEET_ERASE_FENCE_KEY": FENCE_KEY}
    return subprocess.Popen(
        [sys.executable, "-m", "bench.ab.ab_worker", "--sessions",
         str(args.pairs + args.warmup), "--users", str(args.users), "--seed", str(args.seed)],
        cwd=kit, env=env)


async def _pop(redis: Any, proc: subprocess.Popen[bytes], timeout_s: float,
               side: str) -> dict[str, Any]:
    """The side's next message; a clear error if its process died or stayed silent."""
    waited = 0.0
    while waited < timeout_s:
        popped = await redis.blpop([DONE_KEY], timeout=5)
        if popped is not None:
            message: dict[str, Any] = json.loads(popped[1])
            return message
        if proc.poll() is not None:
            raise SystemExit(f"the worker of {side} exited with {proc.returncode}")
        waited += 5
    raise SystemExit(f"the worker of {side} said nothing for {timeout_s:g} s")


async def _pairs(args: argparse.Namespace, sides: dict[str, Side]
                 ) -> dict[str, list[dict[str, Any]]]:
    for side, (redis, proc) in sides.items():
        ready = await _pop(redis, proc, SEED_WAIT_S, side)
        print(f"{side}: seeded, active facts per user {ready['ready']}", file=sys.stderr)
    rng = random.Random(args.seed)
    measured: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    order = list(sides)
    for index in range(args.warmup + args.pairs):
        rng.shuffle(order)
        for side in order:
            redis, proc = sides[side]
            await redis.rpush(GO_KEY, str(index))
            timing = await _pop(redis, proc, JOB_WAIT_S, side)
            if index >= args.warmup:
                measured[side].append(timing)
    return measured


def _bootstrap_ci(diffs: list[float], seed: int, rounds: int = 2000) -> tuple[float, float]:
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds)]


def _report(measured: dict[str, list[dict[str, Any]]], seed: int) -> str:
    sides = list(measured)
    outside = {side: [t["outside_llm_ms"] for t in measured[side]] for side in sides}
    rows = []
    for side in sides:
        stages = [pct([t["stages"].get(name, 0.0) for t in measured[side]], 50)
                  for name in STAGES]
        rows.append([side, *dist_cells(outside[side]), *(ms(v) for v in stages)])
    diffs = [a - b for a, b in zip(outside[sides[0]], outside[sides[1]], strict=True)]
    low, high = _bootstrap_ci(diffs, seed)
    return "\n".join([
        "outside the LLM per job (CONSUMER span less provider calls), ms; stage spans, p50 ms",
        "",
        table(["revision", "p50 ms", "p95 ms", "p99 ms", "mean ms", "jobs",
               *(f"{name} p50" for name in STAGES)], rows),
        "",
        f"paired difference ({sides[0]} - {sides[1]}), median over {len(diffs)} pairs:"
        f" {statistics.median(diffs):+.2f} ms (bootstrap 95% interval {low:+.2f} to"
        f" {high:+.2f} ms)",
    ])


async def _run(args: argparse.Namespace, servers: Servers, other: Path, kit: Path) -> str:
    checkouts = {"this checkout": ROOT, args.against: other}
    databases = await _databases(servers, len(checkouts))
    redis_base = servers.redis_url.rsplit("/", 1)[0]
    sides: dict[str, Side] = {}
    try:
        for n, (side, checkout) in enumerate(checkouts.items()):
            redis_url = f"{redis_base}/{n + 1}"
            proc = _start(checkout, kit, databases[n], redis_url, servers.root / f"home{n}",
                          args)
            sides[side] = Side(Redis.from_url(redis_url), proc)
        measured = await _pairs(args, sides)
    finally:
        for redis, proc in sides.values():
            if proc.poll() is None:
                await redis.rpush(GO_KEY, "stop")
            await redis.aclose()
        for side, (_, proc) in sides.items():
            try:
                code = proc.wait(timeout=JOB_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code != 0:
                print(f"the worker of {side} exited with {code}", file=sys.stderr)
    return _report(measured, args.seed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.version_ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, help="a git revision, e.g. HEAD~3")
    parser.add_argument("--pairs", type=int, default=400, help="measured pairs of jobs")
    parser.add_argument("--warmup", type=int, default=15, help="uncounted pairs first")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.pairs + args.warmup > args.users * workload.MAX_JOBS_PER_USER:
        raise SystemExit("too many pairs for the users: raise --users")
    scratch = Path(tempfile.mkdtemp(prefix="memfleet-ab-"))
    other = scratch / "other"
    try:
        _worktree(args.against, other)
        kit = _kit(scratch / "kit")
        with throwaway_servers(durable=True) as servers:
            print(asyncio.run(_run(args, servers, other, kit)))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)],
                       capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
