"""``make bench``: the per-job time memfleet spends outside the LLM, and one worker's jobs/s.

Offline providers (rules + hashing, embed_dim 1536), throwaway embedded
PostgreSQL (durable=True) and Redis in a temp dir, removed at the end even on
error. The workers themselves seed every user with 200 active facts and every
session with its history; each measured job gets a slice that the rules
extractor turns into 10 candidates (checked from memory_run).

    .venv/bin/python -m bench.run [--jobs 1000] [--burst-jobs 1000] [--samples FILE]

Prints a markdown report and writes it to docs/bench/results.md, plus the latency
plot docs/bench/latency.png when matplotlib can be imported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from redis.asyncio import Redis

from bench.lib import jobs, phases, workload
from bench.lib.plot import plot_latency
from bench.lib.report import TARGET_P50_MS, TOTALS_PANEL, BenchResults, plot_panels, render
from bench.lib.servers import SHARED_BUFFERS, Servers, throwaway_servers
from bench.lib.spans import JobSpans
from worker.config import Settings
from worker.fleet.app import new_event_loop, worker_options
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

RESULTS_DIR = Path(__file__).resolve().parents[1] / "docs" / "bench"


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=200, help="seeded users (200 facts each)")
    parser.add_argument("--jobs", type=int, default=1000, help="measured one-at-a-time jobs")
    parser.add_argument("--burst-jobs", type=int, default=1000,
                        help="jobs drained by the burst worker for jobs/s")
    parser.add_argument("--warmup", type=int, default=20, help="uncounted jobs before timing")
    parser.add_argument("--production-pickups", type=int, default=16,
                        help="hand-overs picked up with the production poll_delay")
    parser.add_argument("--poll-delay", type=float, default=0.05,
                        help="the idle worker's poll_delay for the one-at-a-time run (s);"
                        " much shorter and the polling itself slows the job down")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR,
                        help="where results.md and latency.png go")
    parser.add_argument("--samples", type=Path, default=None,
                        help="also save the plotted samples as JSON (for python -m bench.lib.plot)")
    return parser.parse_args(argv)


def _split(plans: list[workload.SessionPlan],
           sizes: Sequence[int]) -> list[list[workload.SessionPlan]]:
    out, at = [], 0
    for size in sizes:
        out.append(plans[at : at + size])
        at += size
    return out


async def _bench(args: argparse.Namespace, servers: Servers) -> BenchResults:
    began = time.perf_counter()
    # One uncounted job first in the production-poll run: its worker's start-up.
    sizes = [args.warmup + args.jobs, 1 + args.production_pickups, args.burst_jobs]
    if sum(sizes) > args.users * workload.MAX_JOBS_PER_USER:
        raise SystemExit(f"{sum(sizes)} jobs need more than {args.users} users:"
                         f" at most {workload.MAX_JOBS_PER_USER} sessions per user")
    plans = list(workload.sessions(args.seed, args.users, sum(sizes)))
    seq_plans, prod_plans, burst_plans = _split(plans, sizes)

    settings = Settings(
        database_url=servers.database_url, redis_url=servers.redis_url,
        home_dir=servers.root / "home", llm_provider="rules", embed_provider="hashing",
        embed_dim=jobs.EMBED_DIM,
    )
    # Spans are recorded as in production with tracing on: the worker records
    # them only when something exports them, and the exporter is the bench's.
    spans = JobSpans()
    bench = phases.Bench(settings, setup_telemetry(settings, span_exporter=spans), spans,
                         Redis.from_url(servers.redis_url))
    production_poll = float(worker_options(settings, telemetry=bench.telemetry)["poll_delay"])
    try:
        await migrate(servers.database_url, embed_dim=jobs.EMBED_DIM)
        print(f"seeding {args.users} users x {workload.SEEDED_FACTS} facts and {len(plans)}"
              " session histories through the workers ...", file=sys.stderr)
        seeded_at = time.perf_counter()
        await jobs.seed(bench.redis, settings, bench.telemetry, seed=args.seed,
                        users=args.users, plans=plans)
        seeded = await jobs.settle(servers.database_url)
        seed_s = time.perf_counter() - seeded_at
        spans.jobs.clear()

        print(f"{len(seq_plans)} jobs one at a time ...", file=sys.stderr)
        seq = await phases.one_at_a_time("durable=True", bench, seq_plans,
                                         poll_delay_s=args.poll_delay, warmup=args.warmup)
        print(f"{len(prod_plans)} pick-ups with poll_delay={production_poll:g} s ...",
              file=sys.stderr)
        prod = await phases.one_at_a_time("production poll", bench, prod_plans,
                                          poll_delay_s=production_poll, warmup=1,
                                          random_arrival=True)
        print(f"{len(burst_plans)} jobs burst ...", file=sys.stderr)
        burst = await phases.burst_drain("burst", bench, burst_plans)
        await phases.attach_audit(servers.database_url,
                                  [s for p in (seq, prod, burst) for s in p.samples])
        active = await jobs.settle(servers.database_url)
    finally:
        await bench.redis.aclose()
        bench.telemetry.shutdown()

    setup = [
        f"machine: {os.cpu_count()} CPUs, Linux {platform.release()}, Python"
        f" {platform.python_version()}; one worker process = this process (in-process ARQ"
        " worker from worker.fleet.app.build_worker, on worker.fleet.app.new_event_loop)",
        f"PostgreSQL (embedded, durable=True: fsync, synchronous_commit and full_page_writes"
        f" on; shared_buffers={SHARED_BUFFERS}) and Redis (embedded), fresh in a temp dir",
        "providers: MEMFLEET_LLM_PROVIDER=rules, MEMFLEET_EMBED_PROVIDER=hashing,"
        f" embed_dim={jobs.EMBED_DIM}",
        f"data: {args.users} users x {workload.SEEDED_FACTS} active facts (active per user"
        f" after seeding: {seeded[0]}-{seeded[1]}), and {len(plans)} sessions with 1 to"
        f" {workload.MAX_HISTORY_TURNS} small-talk turns of history, all processed by the"
        f" workers ({seed_s:.0f} s); each measured job resumes a session at its cursor with"
        " 10 new messages (5 user turns, 10 statements -> 10 candidates: 5 UPDATE, 2 DELETE,"
        " 2 ADD, 1 NONE); users round-robin in the queue",
        f"settings: max_jobs={settings.max_jobs}, neighbors_k={settings.neighbors_k},"
        f" summary_every_user_turns={settings.summary_every_user_turns} (due in about half"
        " the jobs); tracing: setup_telemetry with the bench's span exporter, which keeps"
        " each job's durations in memory",
        f"bench wall time: {time.perf_counter() - began:.0f} s",
    ]
    return BenchResults(setup=setup, seq=seq, prod=prod, burst=burst,
                        warmup_jobs=args.warmup, active_after=active)


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    # Production's logging setup (JSON on stderr), at WARNING: the worker's per-job
    # INFO line would otherwise land among the bench's output.
    configure_logging("WARNING")
    with throwaway_servers(durable=True) as servers, \
            asyncio.Runner(loop_factory=new_event_loop) as runner:
        results = runner.run(_bench(args, servers))

    args.out_dir.mkdir(parents=True, exist_ok=True)
    png = args.out_dir / "latency.png"
    panels = plot_panels(results)
    title = "memfleet: per-job latency by part (rules + hashing, embed_dim 1536)"
    marks = {TOTALS_PANEL: TARGET_P50_MS}
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
