"""One worker process at MEMFLEET_MAX_JOBS=50 against a model answering in 300 ms.

Throwaway PostgreSQL (durable=True) and Redis; the project's OpenAI-compatible
stub in a thread of this process (the bench's driver, idle while the worker
drains), its chat calls answered after ``--latency-ms``, embeddings at once.
The users and sessions of bench.lib.workload are seeded through the same stub with
no delay by an in-process worker; then every measured session is handed over
(10 new messages, 10 candidates, a summary due in about half of them), the
latency is switched on, and one ``memfleet worker`` process drains the queue.

Reported: jobs/s = jobs / (the first job's start to the last commit, from
memory_run), against the ideal of ``max_jobs`` jobs in flight each taking its
model time (two chat calls in line: extraction, then consolidation; the
embedding call and everything else counted as nothing); and the worker's peak
RSS (VmHWM) and CPU, both from /proc. Goals: at least 90% of the ideal, RSS under
150 MB. With ``--profile FILE`` the worker runs under cProfile and writes its
statistics there at exit (the profiler slows it: time that run apart).

    .venv/bin/python -m bench.max_jobs [--jobs 1000] [--max-jobs 50] [--latency-ms 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from bench.lib import jobs, workload
from bench.lib.proc import cpu_s, machine_busy_s, peak_rss_mb
from bench.lib.servers import Servers, throwaway_servers
from bench.lib.stats import pct
from worker.config import Settings
from worker.fleet.app import new_event_loop
from worker.fleet.gc_tuning import quiet_garbage_collector
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

GOAL_SHARE = 0.90
GOAL_RSS_MB = 150.0
CHAT_CALLS_IN_LINE = 2  # extraction, then consolidation; the summary runs beside them


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.max_jobs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000, help="sessions queued, then drained")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--max-jobs", type=int, default=50)
    parser.add_argument("--latency-ms", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--burst", action="store_true",
                        help="run `memfleet worker --burst`: a freed slot takes the next job"
                        " when a job ends, not at the next poll (MEMFLEET_POLL_DELAY_S)")
    parser.add_argument("--poll-delay", type=float, default=None,
                        help="MEMFLEET_POLL_DELAY_S for the worker (default: the setting's)")
    parser.add_argument("--arq-times", action="store_true",
                        help="keep ARQ's job results (MEMFLEET_KEEP_RESULT_S) and report the"
                        " time around each job's run: ARQ's start to the run's start, the"
                        " commit's start to ARQ's finish, and the slots' share inside ARQ's run")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run the worker under cProfile, statistics written to this file")
    return parser.parse_args(argv)


def _worker_env(servers: Servers, stub: StubServer, max_jobs: int,
                poll_delay: float | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env.update({
        "MEMFLEET_DATABASE_URL": servers.database_url, "MEMFLEET_REDIS_URL": servers.redis_url,
        "MEMFLEET_HOME_DIR": str(servers.root / "home"),
        "MEMFLEET_EMBED_DIM": str(jobs.EMBED_DIM),
        "MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_LLM_BASE_URL": stub.v1,
        "MEMFLEET_EMBED_PROVIDER": "openai", "MEMFLEET_EMBED_BASE_URL": stub.v1,
        "MEMFLEET_MAX_JOBS": str(max_jobs),
        # One connection per job in flight, and one for the worker's own passes.
        "MEMFLEET_DB_POOL_MAX": str(max_jobs + 1),
    })
    if poll_delay is not None:
        env["MEMFLEET_POLL_DELAY_S"] = str(poll_delay)
    return env


def _spawn(env: dict[str, str], log: Path, profile: Path | None,
           burst: bool) -> subprocess.Popen[bytes]:
    run = ([sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "worker.cli"]
           if profile else [sys.executable, "-m", "worker.cli"])
    return subprocess.Popen(  # noqa: S603
        [*run, "worker", "--log-level", "WARNING", *(["--burst"] if burst else [])],
        env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


async def _drain(db: asyncpg.Connection, job_ids: list[str], proc: subprocess.Popen[bytes],
                 timeout_s: float) -> tuple[float, float, float]:
    """Until every job has its memory_run row: (seconds, peak RSS MB, worker CPU s)."""
    deadline = time.monotonic() + timeout_s
    rss = cpu = 0.0
    while True:
        # Read before each check: a --burst worker exits after its last job.
        with contextlib.suppress(OSError, IndexError):
            rss, cpu = max(rss, peak_rss_mb(proc.pid)), cpu_s(proc.pid)
        done = await db.fetchval("SELECT count(*) FROM memory_run WHERE job_id = ANY($1)",
                                 job_ids)
        if done >= len(job_ids):
            break
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited ({proc.returncode}) with {done} jobs done")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{done}/{len(job_ids)} jobs after {timeout_s:g} s")
        await asyncio.sleep(0.2)
    with contextlib.suppress(OSError, IndexError):
        rss, cpu = max(rss, peak_rss_mb(proc.pid)), cpu_s(proc.pid)
    span = await db.fetchval(
        "SELECT extract(epoch FROM max(finished_at) - min(started_at)) FROM memory_run"
        " WHERE job_id = ANY($1)", job_ids)
    return float(span), rss, cpu


async def _arq_times(db: asyncpg.Connection, redis: Redis, job_ids: list[str], slots: int,
                     span_s: float) -> str:
    """From ARQ's kept results (start and finish, ms) and the memory_run rows."""
    raw = await redis.mget([f"arq:result:{job_id}" for job_id in job_ids])
    arq = {job_id: json.loads(value) for job_id, value in zip(job_ids, raw, strict=True)
           if value is not None}
    rows = await db.fetch(
        "SELECT job_id, extract(epoch FROM started_at) * 1000 AS started,"
        " extract(epoch FROM finished_at) * 1000 AS finished FROM memory_run"
        " WHERE job_id = ANY($1)", list(arq))
    before = [float(r["started"]) - arq[r["job_id"]]["st"] for r in rows]
    after = [arq[r["job_id"]]["ft"] - float(r["finished"]) for r in rows]
    inside = sum(a["ft"] - a["st"] for a in arq.values()) / (slots * span_s * 1000)
    return (f"- around each run (ARQ's kept results, {len(arq)} jobs): ARQ's start to the"
            f" run's start p50 {pct(before, 50):.1f} / p95 {pct(before, 95):.1f} ms; the"
            f" commit's start to ARQ's finish p50 {pct(after, 50):.1f} / p95"
            f" {pct(after, 95):.1f} ms; the slots were inside ARQ's run of a job"
            f" {inside:.0%} of the time")


async def _steady_rate(db: asyncpg.Connection, job_ids: list[str]) -> float:
    """Commits per second between the 10th and the 90th percentile commit: the rate with
    every slot in use, without the drain's first and last rounds (slots filling up from a
    cold start, then emptying as the queue runs out)."""
    finished = sorted(await db.fetchval(
        "SELECT array_agg(extract(epoch FROM finished_at)::float8) FROM memory_run"
        " WHERE job_id = ANY($1)", job_ids))
    first, last = len(finished) // 10, len(finished) * 9 // 10
    return (last - first) / (finished[last] - finished[first])


async def _job_times(db: asyncpg.Connection, job_ids: list[str], slots: int,
                     span_s: float) -> str:
    """Each job's time from its start to its commit and its stages' (timings_ms), and
    the share of the slots' time (slots x span) spent inside jobs."""
    rows = await db.fetch(
        "SELECT extract(epoch FROM finished_at - started_at) * 1000 AS took, timings_ms,"
        " consolidation_attempts AS attempts"
        " FROM memory_run WHERE job_id = ANY($1)", job_ids)
    took = [float(row["took"]) for row in rows]
    stages: dict[str, list[float]] = {}
    for row in rows:
        for name, value in json.loads(row["timings_ms"]).items():
            stages.setdefault(name, []).append(float(value))
    parts = ", ".join(f"{name} {pct(values, 50):.0f}/{pct(values, 95):.0f}"
                      for name, values in stages.items())
    again = sum(1 for row in rows if row["attempts"] > 1)
    return (f"- a job took {pct(took, 50):.0f} ms p50, {pct(took, 95):.0f} ms p95 from its start"
            f" to its commit; its stages' p50/p95 (ms): {parts}; {again} of {len(rows)} jobs"
            " consolidated again (their user's facts changed under them); the slots were"
            f" inside a job {sum(took) / (slots * span_s * 1000):.0%} of the time")


async def _bench(args: argparse.Namespace, servers: Servers, stub: StubServer) -> list[str]:
    plans = list(workload.sessions(args.seed, args.users, args.jobs))
    settings = Settings(
        database_url=servers.database_url, redis_url=servers.redis_url,
        home_dir=servers.root / "home", llm_provider="openai", llm_base_url=stub.v1,
        embed_provider="openai", embed_base_url=stub.v1, embed_dim=jobs.EMBED_DIM,
    )
    telemetry = setup_telemetry(settings)
    redis = Redis.from_url(servers.redis_url)
    await migrate(servers.database_url, embed_dim=jobs.EMBED_DIM)
    db = await asyncpg.connect(servers.database_url)
    proc: subprocess.Popen[bytes] | None = None
    try:
        print(f"seeding {args.users} users and {len(plans)} sessions through the stub ...",
              file=sys.stderr)
        await jobs.seed(redis, settings, telemetry, seed=args.seed, users=args.users,
                        plans=plans)
        await jobs.settle(servers.database_url)
        job_ids = [(await jobs.hand_over(redis, settings, plan)).job_id for plan in plans]
        stub.add_fault("latency_ms", latency_ms=args.latency_ms, count=1_000_000_000,
                       path=CHAT_PATH)
        # The stub answers from this process: keep the collector off what seeding
        # built, or a full collection pauses every answer in flight.
        quiet_garbage_collector()
        print(f"{len(job_ids)} jobs queued; one worker process drains them ...", file=sys.stderr)
        load_before = os.getloadavg()
        busy_before, driver_before = machine_busy_s(), time.process_time()
        env = _worker_env(servers, stub, args.max_jobs, args.poll_delay)
        if args.arq_times:
            env["MEMFLEET_KEEP_RESULT_S"] = "3600"
        proc = _spawn(env, servers.root / "worker.log", args.profile, args.burst)
        span_s, rss_mb, cpu_s = await _drain(db, job_ids, proc,
                                             timeout_s=60 + 2 * len(job_ids))
        job_times = await _job_times(db, job_ids, args.max_jobs, span_s)
        steady = await _steady_rate(db, job_ids)
        arq_times = (await _arq_times(db, redis, job_ids, args.max_jobs, span_s)
                     if args.arq_times else None)
        load_after = os.getloadavg()
        busy_s = machine_busy_s() - busy_before
        driver_s = time.process_time() - driver_before  # the stub's answers, mostly
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # a graceful stop also writes the profile
            proc.wait(timeout=60)
        await db.close()
        await redis.aclose()
        telemetry.shutdown()
    rate = len(job_ids) / span_s
    ideal = args.max_jobs / (CHAT_CALLS_IN_LINE * args.latency_ms / 1000)
    return [
        f"- {len(job_ids)} jobs queued over {args.users} users x {workload.SEEDED_FACTS}"
        f" facts; one `memfleet worker` process, MEMFLEET_MAX_JOBS={args.max_jobs},"
        f" MEMFLEET_DB_POOL_MAX={args.max_jobs + 1}; chat calls answered in"
        f" {args.latency_ms} ms, embeddings at once; embed_dim {jobs.EMBED_DIM}"
        + ("; `memfleet worker --burst`" if args.burst else "")
        + ("; the worker under cProfile (slower)" if args.profile else ""),
        f"- load average (1 min) before / after the drain: {load_before[0]:.2f} /"
        f" {load_after[0]:.2f}; the worker used {cpu_s:.1f} s of CPU,"
        f" {1000 * cpu_s / len(job_ids):.1f} ms per job: one process (one event loop) can"
        f" complete at most {len(job_ids) / cpu_s:.1f} jobs/s with a core to itself",
        f"- from the worker's start to the last commit ({span_s:.1f} s of jobs), the machine's"
        f" {os.cpu_count()} CPUs were busy {busy_s:.1f} s: the worker {cpu_s:.1f} s (its"
        f" start included), this process (the stub's answers, the driver's polls)"
        f" {driver_s:.1f} s, everything else (PostgreSQL, Redis, other users of the machine)"
        f" {busy_s - cpu_s - driver_s:.1f} s",
        job_times,
        *([arq_times] if arq_times else []),
        "",
        "| row | goal | measured | result |",
        "| --- | ---: | ---: | ---: |",
        f"| jobs/s, one worker at max_jobs {args.max_jobs}, all slots busy (10th to 90th"
        f" percentile commit) | >= {GOAL_SHARE:.0%} of ideal {ideal:.1f} ({args.max_jobs} /"
        f" {CHAT_CALLS_IN_LINE} x {args.latency_ms} ms) | {steady:.1f} ({steady / ideal:.0%})"
        f" | {'PASS' if steady >= GOAL_SHARE * ideal else 'FAIL'} |",
        f"| jobs/s, the whole drain (first start to last commit) | >= {GOAL_SHARE:.0%} of"
        f" ideal {ideal:.1f} | {rate:.1f} ({rate / ideal:.0%})"
        f" | {'PASS' if rate >= GOAL_SHARE * ideal else 'FAIL'} |",
        f"| worker peak RSS (VmHWM) | < {GOAL_RSS_MB:g} MB | {rss_mb:.0f} MB"
        f" | {'PASS' if rss_mb < GOAL_RSS_MB else 'FAIL'} |",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    configure_logging("WARNING")
    began = time.perf_counter()
    with throwaway_servers(durable=True) as servers, StubServer(dim=jobs.EMBED_DIM) as stub, \
            asyncio.Runner(loop_factory=new_event_loop) as runner:
        lines = runner.run(_bench(args, servers, stub))
    print(f"# One worker process at max_jobs {args.max_jobs} ({os.cpu_count()} CPUs; this"
          " machine's times)")
    print()
    print(*lines, sep="\n")
    print()
    print(f"wall time {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
