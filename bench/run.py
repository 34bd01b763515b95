"""``make bench``: the per-job time memfleet spends outside the LLM, and one worker's jobs/s.

Offline providers (rules + hashing, embed_dim 1536), throwaway embedded
PostgreSQL (durable=True) and Redis in a temp dir, removed at the end even on
error. Users are seeded with 200 active facts each; every job gets a slice that
the rules extractor turns into exactly 10 candidates (checked from memory_run).

    .venv/bin/python -m bench.run [--jobs 1000] [--no-fast] [--samples FILE]

Prints a markdown report and writes it to bench/results.md, plus the latency
plot bench/latency.png when matplotlib can be imported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from bench import phases, workload
from bench.plot import plot_latency
from bench.probes import install_recorder
from bench.report import TARGET_P50_MS, TOTALS_PANEL, BenchResults, plot_panels, render
from bench.seed import prepare_database
from bench.servers import SHARED_BUFFERS, Servers, throwaway_servers
from worker.app import new_event_loop, worker_options
from worker.config import Settings
from worker.telemetry import configure_logging

EMBED_DIM = 1536  # production's (text-embedding-3-small)
BENCH_DIR = Path(__file__).resolve().parent


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=200, help="seeded users (200 facts each)")
    parser.add_argument("--jobs", type=int, default=1000,
                        help="measured one-at-a-time jobs (durable=True)")
    parser.add_argument("--burst-jobs", type=int, default=1000,
                        help="jobs drained by the burst worker for jobs/s")
    parser.add_argument("--warmup", type=int, default=20, help="uncounted jobs before timing")
    parser.add_argument("--production-pickups", type=int, default=16,
                        help="hand-overs picked up with the production poll_delay")
    parser.add_argument("--poll-delay", type=float, default=0.05,
                        help="the idle worker's poll_delay for the one-at-a-time runs (s);"
                        " much shorter and the polling itself slows the job down")
    parser.add_argument("--fast-jobs", type=int, default=200,
                        help="one-at-a-time jobs with durable=False settings")
    parser.add_argument("--fast-burst-jobs", type=int, default=300,
                        help="burst jobs with durable=False settings")
    parser.add_argument("--no-fast", action="store_true", help="skip the durable=False runs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out-dir", type=Path, default=BENCH_DIR,
                        help="where results.md and latency.png go")
    parser.add_argument("--samples", type=Path, default=None,
                        help="also save the plotted samples as JSON (for python -m bench.plot)")
    return parser.parse_args(argv)


class _CountingHandler(logging.Handler):
    """Counts library warnings instead of printing one line per job."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[f"{record.name}: {record.getMessage()}"] += 1


def _count_warnings(logger_name: str) -> _CountingHandler:
    handler = _CountingHandler()
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    logger.propagate = False
    return handler


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _server_pids(servers: Servers) -> dict[str, int]:
    pids = {
        "postgres": _pid(servers.root / "postgres" / "pgdata" / "postmaster.pid"),
        "redis": _pid(servers.root / "redis" / "redis.pid"),
    }
    return {k: v for k, v in pids.items() if v is not None}


async def _versions(servers: Servers, redis: Redis) -> tuple[str, str, str]:
    conn = await asyncpg.connect(servers.database_url)
    try:
        pg = str(await conn.fetchval("SHOW server_version"))
        vector = str(await conn.fetchval(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
    finally:
        await conn.close()
    info = await redis.info("server")
    name = "valkey" if "valkey_version" in info else "redis"
    return pg, vector, f"{name} {info.get('valkey_version') or info.get('redis_version')}"


async def _active_range(database_url: str) -> tuple[int, int]:
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            "SELECT min(n) AS lo, max(n) AS hi FROM (SELECT count(*) AS n FROM memory_fact"
            " WHERE superseded_at IS NULL GROUP BY user_id) AS per_user")
    finally:
        await conn.close()
    return (int(row["lo"] or 0), int(row["hi"] or 0))


def _split(plans: list[workload.SessionPlan],
           sizes: Sequence[int]) -> list[list[workload.SessionPlan]]:
    out, at = [], 0
    for size in sizes:
        out.append(plans[at : at + size])
        at += size
    return out


async def _bench(args: argparse.Namespace, servers: Servers) -> BenchResults:
    began = time.perf_counter()
    fast = not args.no_fast
    sizes = [args.warmup + args.jobs, args.production_pickups, args.burst_jobs,
             args.fast_jobs if fast else 0, args.fast_burst_jobs if fast else 0]
    total = sum(sizes)
    if total > args.users * workload.MAX_JOBS_PER_USER:
        raise SystemExit(f"{total} jobs need more than {args.users} users:"
                         f" at most {workload.MAX_JOBS_PER_USER} sessions per user")
    plans = list(workload.sessions(args.seed, args.users, total))
    wrong = [p.session_id for p in plans if workload.extracted_count(p) != 10]
    if wrong:
        raise SystemExit(f"{len(wrong)} sessions do not yield 10 candidates, e.g. {wrong[0]}")
    seq_plans, prod_plans, burst_plans, fast_plans, fast_burst_plans = _split(plans, sizes)

    print(f"seeding {args.users} users x {workload.SEEDED_FACTS} facts"
          f" and {total} session cursors ...", file=sys.stderr)
    seeded_at = time.perf_counter()
    facts = await prepare_database(servers.database_url, seed=args.seed, users=args.users,
                                   plans=plans, embed_dim=EMBED_DIM)
    seed_s = time.perf_counter() - seeded_at

    recorder = install_recorder()
    settings = Settings(
        database_url=servers.database_url, redis_url=servers.redis_url,
        home_dir=servers.root / "home", llm_provider="rules", embed_provider="hashing",
        embed_dim=EMBED_DIM,
    )
    production_poll = float(worker_options(settings)["poll_delay"])
    redis = Redis.from_url(servers.redis_url)
    pids = _server_pids(servers)
    durability: dict[str, dict[str, str]] = {}
    try:
        pg_version, vector_version, redis_version = await _versions(servers, redis)
        durability["durable=True"] = await phases.set_durability(servers.database_url,
                                                                durable=True)
        round_trips = await phases.round_trips(servers.database_url, redis)
        print("neighbour query alone ...", file=sys.stderr)
        isolated = await phases.isolated_parts(settings, seq_plans[args.warmup:])

        print(f"{len(seq_plans)} jobs one at a time (durable=True) ...", file=sys.stderr)
        seq = await phases.one_at_a_time(
            "durable=True", settings, redis, seq_plans, recorder, poll_delay_s=args.poll_delay,
            cpu_pids=pids)
        seq.samples = seq.samples[args.warmup:]
        print(f"{len(prod_plans)} pick-ups with poll_delay={production_poll:g} s ...",
              file=sys.stderr)
        prod = await phases.one_at_a_time(
            "durable=True, production poll", settings, redis, prod_plans, recorder,
            poll_delay_s=production_poll, cpu_pids=pids, random_arrival=True)
        print(f"{len(burst_plans)} jobs burst (durable=True) ...", file=sys.stderr)
        burst = await phases.burst_drain("durable=True, burst", settings, redis, burst_plans,
                                         recorder, cpu_pids=pids)
        nd_seq = nd_burst = None
        if fast:
            durability["durable=False"] = await phases.set_durability(
                servers.database_url, durable=False)
            print(f"{len(fast_plans)} jobs one at a time (durable=False) ...", file=sys.stderr)
            nd_seq = await phases.one_at_a_time(
                "durable=False", settings, redis, fast_plans, recorder,
                poll_delay_s=args.poll_delay, cpu_pids=pids)
            print(f"{len(fast_burst_plans)} jobs burst (durable=False) ...", file=sys.stderr)
            nd_burst = await phases.burst_drain(
                "durable=False, burst", settings, redis, fast_burst_plans, recorder,
                cpu_pids=pids)
        measured = [p for p in (seq, prod, burst, nd_seq, nd_burst) if p is not None]
        await phases.attach_audit(servers.database_url,
                                  [s for p in measured for s in p.samples])
        active = await _active_range(servers.database_url)
    finally:
        await redis.aclose()

    setup = [
        f"machine: {os.cpu_count()} CPUs, Linux {platform.release()}, Python"
        f" {platform.python_version()}; one worker process = this process (in-process ARQ"
        f" worker from worker.app.worker_options)",
        f"PostgreSQL {pg_version} + pgvector {vector_version} (embedded, fresh cluster in a temp"
        f" dir, TCP on 127.0.0.1, shared_buffers={SHARED_BUFFERS} so the fact table is held in"
        f" memory as on a production server; PostgreSQL's default is 128MB); {redis_version}"
        " (embedded)",
        "durability: EmbeddedPostgres(durable=True), i.e. fsync=on, synchronous_commit=on,"
        " full_page_writes=on, for the PASS/FAIL runs"
        + ("; the durable=False runs switch the same cluster to durable=False's settings"
           " (fsync, synchronous_commit, full_page_writes off) with ALTER SYSTEM + reload"
           if fast else ""),
        "providers: MEMFLEET_LLM_PROVIDER=rules, MEMFLEET_EMBED_PROVIDER=hashing,"
        f" embed_dim={EMBED_DIM} (halfvec({EMBED_DIM}) column)",
        f"data: {args.users} users x {workload.SEEDED_FACTS} active facts ({facts} rows, COPY,"
        f" {seed_s:.1f} s incl. migrate/ANALYZE/CHECKPOINT); each job is its own session"
        f" resuming at a cursor after {2 * workload.HISTORY_TURNS} processed messages, with 10"
        " new ones (5 user turns carrying 10 statements -> 10 candidates: 5 UPDATE,"
        " 2 DELETE, 2 ADD, 1 NONE, so users stay at 200 active facts); users round-robin in"
        " the queue",
        f"settings: max_jobs={settings.max_jobs}, neighbors_k={settings.neighbors_k},"
        f" db_pool_max={settings.db_pool_max},"
        f" summary_every_user_turns={settings.summary_every_user_turns} (the summary is"
        " refreshed in about half the jobs); tracing: the worker's OpenTelemetry SDK provider"
        " plus the bench's in-memory span processor, nothing exported",
        f"bench wall time: {time.perf_counter() - began:.0f} s",
    ]
    return BenchResults(
        setup=setup, seq=seq, prod_idle=prod, burst=burst, isolated=isolated,
        round_trips=round_trips, cpus=os.cpu_count() or 1, nd_seq=nd_seq, nd_burst=nd_burst,
        active_after=active, durability=durability, warmup_jobs=args.warmup,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    # Production's logging setup (JSON on stderr), at WARNING: the worker's per-job
    # INFO line would otherwise land in the report on stdout.
    configure_logging("WARNING")
    # The SDK warns once per offending span; the report gives the counts instead.
    otel_warnings = _count_warnings("opentelemetry")
    # On the loop `memfleet worker` runs on.
    with throwaway_servers(durable=True) as servers, \
            asyncio.Runner(loop_factory=new_event_loop) as runner:
        results = runner.run(_bench(args, servers))
    results.library_warnings = dict(otel_warnings.counts)

    args.out_dir.mkdir(parents=True, exist_ok=True)
    png = args.out_dir / "latency.png"
    panels = plot_panels(results)
    title = "memfleet: per-job latency by part (rules + hashing, embed_dim 1536)"
    marks = {TOTALS_PANEL: TARGET_P50_MS}  # the p50 target, on the totals
    if plot_latency(panels, png, title, marks):
        plot_note = f"Latency plot: {png.name}."
    else:
        plot_note = (f"Latency plot skipped: matplotlib is not importable here ({png.name} not"
                     " written).")
    if args.samples is not None:
        args.samples.write_text(json.dumps({"title": title, "panels": panels, "marks": marks}))
    report = render(results, plot_note)
    (args.out_dir / "results.md").write_text(report + "\n")
    print(report)
    # A missed target is a finding printed in the report, not a failure of the bench.
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
