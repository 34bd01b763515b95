"""Interleaved A/B of whole jobs: this checkout's worker against another revision's.

Whole ``make bench`` runs cannot resolve a change of a millisecond or two on
this VM: its speed drifts by a quarter over minutes (docs/bench.md). Here two
worker processes, one per revision, serve two queues on the same PostgreSQL
and Redis; jobs are handed over one at a time, in pairs, each pair in a random
order, so a slow phase slows both alike. Each worker times its jobs with the
bench's probes ("outside the LLM": ARQ's run_job minus the offline provider
calls), and the report gives each side's p50/p95 and the median of the paired
differences with a bootstrap 95% interval.

    .venv/bin/python -m bench.version_ab --against REV [--pairs 400]

REV is checked out in a temporary git worktree (removed at the end); both
revisions must share the database schema (the current migrations are applied).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench import workload
from bench.ab_worker import DONE_PREFIX, READY_PREFIX
from bench.seed import prepare_database
from bench.servers import Servers, throwaway_servers
from bench.stats import dist_cells, ms, pct, table
from worker.client import schedule_memory_persistence

ROOT = Path(__file__).resolve().parent.parent
EMBED_DIM = 1536
WAIT_S = 60


def _worktree(rev: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), rev],
                   check=True, capture_output=True)
    shutil.copy(ROOT / "bench" / "ab_worker.py", into / "bench" / "ab_worker.py")
    return into


def _start(checkout: Path, queue: str, out: Path, servers: Servers) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(checkout),
           "MEMFLEET_DATABASE_URL": servers.database_url, "MEMFLEET_REDIS_URL": servers.redis_url,
           "MEMFLEET_HOME_DIR": str(servers.root / "home"), "MEMFLEET_LLM_PROVIDER": "rules",
           "MEMFLEET_EMBED_PROVIDER": "hashing", "MEMFLEET_EMBED_DIM": str(EMBED_DIM)}
    return subprocess.Popen([sys.executable, "-m", "bench.ab_worker", queue, str(out)],
                            cwd=checkout, env=env)


async def _pairs(redis: Redis, plans: Sequence[workload.SessionPlan], queues: dict[str, str],
                 warmup: int, seed: int) -> dict[str, list[str]]:
    """Hand over pair after pair; return each side's measured job ids, in pair order."""
    for queue in queues.values():
        if await redis.blpop([READY_PREFIX + queue], timeout=WAIT_S) is None:
            raise SystemExit(f"the worker of {queue} did not start within {WAIT_S} s")
    rng = random.Random(seed)
    jobs: dict[str, list[str]] = {side: [] for side in queues}
    sides = list(queues)
    for pair in range(len(plans) // 2):
        rng.shuffle(sides)
        for n, side in enumerate(sides):
            plan = plans[2 * pair + n]
            queue = queues[side]
            enqueued = await schedule_memory_persistence(
                redis, plan.session_id, plan.user_id, plan.messages, queue_name=queue)
            done = await redis.blpop([DONE_PREFIX + queue], timeout=WAIT_S)
            if done is None or done[1].decode() != enqueued.job_id:
                raise SystemExit(f"{side}: job {enqueued.job_id} did not finish in {WAIT_S} s")
            if pair >= warmup:
                jobs[side].append(enqueued.job_id)
    return jobs


def _bootstrap_ci(diffs: list[float], seed: int, rounds: int = 2000) -> tuple[float, float]:
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds)]


def _report(results: dict[str, dict[str, Any]], jobs: dict[str, list[str]], seed: int) -> str:
    sides = list(jobs)
    infra = {side: [results[side][j]["infra_ms"] for j in jobs[side]] for side in sides}
    rows = []
    for side in sides:
        stages = [pct([results[side][j]["stages"].get(name, 0.0) for j in jobs[side]], 50)
                  for name in ("lock", "cursor", "consolidate", "persist")]
        rows.append([side, *dist_cells(infra[side]), *(ms(v) for v in stages)])
    diffs = [a - b for a, b in zip(infra[sides[0]], infra[sides[1]], strict=True)]
    low, high = _bootstrap_ci(diffs, seed)
    return "\n".join([
        table(["revision", "p50 ms", "p95 ms", "p99 ms", "mean ms", "jobs",
               "lock p50", "cursor p50", "consolidate p50", "persist p50"], rows),
        "",
        f"paired difference ({sides[0]} - {sides[1]}), median over {len(diffs)} pairs:"
        f" {statistics.median(diffs):+.2f} ms (bootstrap 95% interval {low:+.2f} to"
        f" {high:+.2f} ms)",
    ])


async def _run(args: argparse.Namespace, servers: Servers, other: Path, out_dir: Path) -> str:
    count = 2 * (args.pairs + args.warmup)
    plans = list(workload.sessions(args.seed, args.users, count))
    await prepare_database(servers.database_url, seed=args.seed, users=args.users,
                           plans=plans, embed_dim=EMBED_DIM)
    checkouts = {"this checkout": ROOT, args.against: other}
    queues = {side: f"bench:ab:queue:{n}" for n, side in enumerate(checkouts)}
    outs = {side: out_dir / f"{n}.json" for n, side in enumerate(checkouts)}
    procs = {side: _start(checkouts[side], queues[side], outs[side], servers)
             for side in checkouts}
    redis = Redis.from_url(servers.redis_url)
    try:
        jobs = await _pairs(redis, plans, queues, args.warmup, args.seed)
    finally:
        await redis.aclose()
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for side, proc in procs.items():
            if proc.wait(timeout=WAIT_S) != 0:
                raise SystemExit(f"the worker of {side} exited with {proc.returncode}")
    results = {side: json.loads(outs[side].read_text()) for side in checkouts}
    return _report(results, jobs, args.seed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, help="a git revision, e.g. HEAD~3")
    parser.add_argument("--pairs", type=int, default=400, help="measured pairs of jobs")
    parser.add_argument("--warmup", type=int, default=15, help="uncounted pairs first")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if 2 * (args.pairs + args.warmup) > args.users * workload.MAX_JOBS_PER_USER:
        raise SystemExit("too many pairs for the users: raise --users")
    scratch = Path(tempfile.mkdtemp(prefix="memfleet-ab-"))
    other = scratch / "other"
    try:
        _worktree(args.against, other)
        with throwaway_servers(durable=True) as servers:
            print(asyncio.run(_run(args, servers, other, scratch)))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)],
                       capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
