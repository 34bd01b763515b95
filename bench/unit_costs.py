"""Unit costs of one Redis and one PostgreSQL: per hand-over, per job, per stored fact.

Throwaway PostgreSQL (durable=True) and Redis; the project's OpenAI-compatible stub
over HTTP (the real openai client in the worker); bench.lib.workload's users (200 facts
each) and sessions. Steps, each read as counter deltas (bench.lib.unit_costs_probe):

1. ``--sessions`` first hand-overs (``schedule_memory_persistence``, each queues a
   job), then as many follow-ups (one more turn each, joined to the queued job):
   Redis commands by name, server usec, CPU of the Redis process, used_memory and
   the MEMORY USAGE of each session's keys, the user's keys and its ARQ job;
2. one burst worker drains those jobs (chat calls answered at once): Redis
   commands and CPU per job (the worker's polls included), PostgreSQL rows written
   by table, WAL bytes, the persist stage's time (memory_run.timings_ms);
3. memory_fact's bytes per row: heap, TOAST, each index (after VACUUM);
4. the coalescing ratio for paced chats (bench.lib.unit_costs_pacing);
5. per-replica jobs/s at a 300 ms and a 1 s model, MEMFLEET_MAX_JOBS 10 (the
   default) and 50: ``python -m bench.max_jobs`` with ``--jobs`` small.

    python -m bench.unit_costs [--sessions 100] [--users 10] [--json FILE] [--quick]
    python -m bench.unit_costs --report FILE   (the tables again, from a --json file)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from bench.lib import jobs, workload
from bench.lib.capacity_model import UnitCosts
from bench.lib.servers import throwaway_servers
from bench.lib.spans import JobSpans
from bench.lib.stats import pct
from bench.lib.unit_costs_pacing import Pacing, paced
from bench.lib.unit_costs_probe import (
    fact_storage,
    pg_counters,
    pg_delta,
    postgres_cpu_s,
    redis_counters,
    redis_delta,
    wal_stats,
)
from bench.lib.unit_costs_report import render
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.fleet.app import drain_queue, new_event_loop
from worker.protocol import keys
from worker.protocol.keys import SessionRef
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

PACINGS = (
    Pacing("chat pace, worker keeping up", sessions=40, turns=6, pause_s=(3.0, 8.0),
           max_jobs=10, latency_ms=300),
    Pacing("chat pace, 1 s model", sessions=40, turns=6, pause_s=(3.0, 8.0),
           max_jobs=10, latency_ms=1000),
    Pacing("chat pace, worker lagging", sessions=40, turns=6, pause_s=(3.0, 8.0),
           max_jobs=1, latency_ms=1000),
)
MAX_JOBS_RUNS = ((300, 10), (300, 50), (1000, 10), (1000, 50))


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.unit_costs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None, help="write the raw figures here")
    parser.add_argument("--max-jobs-jobs", type=int, default=100,
                        help="--jobs of each bench.max_jobs run")
    parser.add_argument("--report", type=Path, default=None, metavar="JSON",
                        help="measure nothing: print the tables from a --json file of a run")
    parser.add_argument("--quick", action="store_true",
                        help="skip the paced runs and the bench.max_jobs runs")
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.users < 1:
        parser.error("--sessions and --users must be at least 1")
    if args.sessions > args.users * workload.MAX_JOBS_PER_USER:
        parser.error(f"at most {workload.MAX_JOBS_PER_USER} sessions per user: add --users")
    return args


async def _session_bytes(redis: Redis, plan: workload.SessionPlan, job_id: str | None,
                         queue: str) -> int:
    session = SessionRef(plan.user_id, plan.session_id)
    names = [*session.state_keys, *keys.user_keys(plan.user_id)]
    if job_id:
        names.append(keys.arq_job_key(job_id))
    total = 0
    for name in names:
        total += int(await redis.memory_usage(name, samples=0) or 0)
    return total


async def _handovers(redis: Redis, settings: Settings, plans: Sequence[workload.SessionPlan],
                     follow_up: bool) -> dict[str, Any]:
    before = await redis_counters(redis)
    began = time.perf_counter()
    queued: list[str | None] = []
    payload = 0
    for plan in plans:
        messages = plan.messages
        if follow_up:
            messages = [*messages, {"role": "user", "content": "Thanks, that is all for now."},
                        {"role": "assistant", "content": "Talk soon."}]
        payload += len(json.dumps(messages, ensure_ascii=False).encode())
        enqueued = await schedule_memory_persistence(
            redis, plan.session_id, plan.user_id, messages, queue_name=settings.queue_name)
        queued.append(enqueued.job_id)
    seconds = time.perf_counter() - began
    after = await redis_counters(redis)
    delta = redis_delta(before, after)
    n = len(plans)
    held = [await _session_bytes(redis, p, j, settings.queue_name)
            for p, j in zip(plans, queued, strict=True)]
    return {
        "n": n, "jobs_queued": sum(j is not None for j in queued),
        "messages_json_bytes": payload / n,
        "commands": delta.total_calls / n, "scripts": delta.script_calls / n,
        "by_command": {k: v / n for k, v in delta.calls.items()},
        "usec": delta.usec / n, "cpu_ms": 1000 * delta.cpu_s / n,
        "used_memory": delta.used_memory / n, "memory_usage_keys": sum(held) / n,
        "client_ms": 1000 * seconds / n, "job_ids": [j for j in queued if j],
    }


async def _drain(redis: Redis, db: asyncpg.Connection, settings: Settings, telemetry: Any,
                 job_ids: list[str], root: Path, spans: JobSpans) -> dict[str, Any]:
    r_before, p_before = await redis_counters(redis), await pg_counters(db)
    spans.jobs.clear()
    wal_before, pg_cpu_before = await wal_stats(db), postgres_cpu_s(root)
    await drain_queue(settings, telemetry=telemetry)
    r_after, p_after = await redis_counters(redis), await pg_counters(db)
    wal_after, pg_cpu = await wal_stats(db), postgres_cpu_s(root) - pg_cpu_before
    r, p = redis_delta(r_before, r_after), await pg_delta(db, p_before, p_after)
    runs = await db.fetch("SELECT added, updated, deleted, unchanged"
                          " FROM memory_run WHERE job_id = ANY($1)", job_ids)
    n = len(runs)
    # The persist stage (one transaction: facts, supersession, cursor, run row, commit),
    # from its span: memory_run.timings_ms is written inside it, before it ends.
    persist = [t.stages["persist"] for job_id, t in spans.jobs.items()
               if job_id in set(job_ids) and "persist" in t.stages]
    fact_rows = p.rows.get("memory_fact", (0, 0, 0))
    return {
        "jobs": n, "outcomes": {k: sum(int(r[k]) for r in runs) / n
                                for k in ("added", "updated", "deleted", "unchanged")},
        "redis_commands": r.total_calls / n, "redis_scripts": r.script_calls / n,
        "redis_by_command": {k: v / n for k, v in r.calls.items()},
        "redis_usec": r.usec / n, "redis_cpu_ms": 1000 * r.cpu_s / n,
        "pg_rows": p.rows_written / n,
        "pg_rows_by_table": {t: [v / n for v in vals] for t, vals in p.rows.items()},
        "pg_cpu_ms": 1000 * pg_cpu / n,
        "wal_records": (wal_after[0] - wal_before[0]) / n,
        "wal_fpi": (wal_after[1] - wal_before[1]) / n,
        "redis_used_memory_after": r.used_memory,
        "wal_bytes": p.wal_bytes / n, "persist_n": len(persist), "persist_ms_p50": pct(persist, 50),
        "persist_ms_p95": pct(persist, 95), "fact_rows_inserted": fact_rows[0] / n,
    }


def _max_jobs(latency_ms: int, max_jobs: int, n: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.max_jobs", "--jobs", str(n), "--users", "10",
               "--latency-ms", str(latency_ms), "--max-jobs", str(max_jobs)]
    out = subprocess.run(command, capture_output=True, text=True, check=True,  # noqa: S603
                         timeout=900).stdout
    steady = re.search(r"all slots busy.*?\|.*?\| ([\d.]+) \(", out)
    whole = re.search(r"the whole drain.*?\|.*?\| ([\d.]+) \(", out)
    rss = re.search(r"peak RSS.*?\| ([\d.]+) MB", out)
    return {"latency_ms": latency_ms, "max_jobs": max_jobs, "jobs": n,
            "command": "python -m bench.max_jobs " + " ".join(command[3:]),
            "jobs_per_s_steady": float(steady.group(1)) if steady else None,
            "jobs_per_s_whole": float(whole.group(1)) if whole else None,
            "rss_mb": float(rss.group(1)) if rss else None}


async def _bench(args: argparse.Namespace, database_url: str, redis_url: str, home: Path,
                 stub: StubServer) -> dict[str, Any]:
    settings = Settings(database_url=database_url, redis_url=redis_url, home_dir=home,
                        llm_provider="openai", llm_base_url=stub.v1, embed_provider="openai",
                        embed_base_url=stub.v1, embed_dim=jobs.EMBED_DIM)
    spans = JobSpans()  # each job's stage times, from the spans it opens
    telemetry = setup_telemetry(settings, span_exporter=spans)
    await migrate(database_url, embed_dim=jobs.EMBED_DIM)
    redis = Redis.from_url(redis_url)
    db = await asyncpg.connect(database_url)
    plans = list(workload.sessions(args.seed, args.users, args.sessions))
    out: dict[str, Any] = {}
    try:
        print(f"seeding {args.users} users and {len(plans)} sessions ...", file=sys.stderr)
        await jobs.seed(redis, settings, telemetry, seed=args.seed, users=args.users,
                        plans=plans)
        await jobs.settle(database_url)
        base_memory = (await redis_counters(redis)).used_memory
        out["first"] = await _handovers(redis, settings, plans, follow_up=False)
        out["follow_up"] = await _handovers(redis, settings, plans, follow_up=True)
        print("draining ...", file=sys.stderr)
        out["job"] = await _drain(redis, db, settings, telemetry, out["first"]["job_ids"],
                                  home.parent, spans)
        out["held_after_job"] = sum(
            [await _session_bytes(redis, p, None, settings.queue_name) for p in plans]
        ) / len(plans)
        out["used_memory_after_jobs"] = (
            (await redis_counters(redis)).used_memory - base_memory) / len(plans)
        out["fact"] = await fact_storage(db)
        out["paced"] = []
        if not args.quick:
            for i, pacing in enumerate(PACINGS):
                print(f"paced: {pacing.name} ...", file=sys.stderr)
                r_before, p_before = await redis_counters(redis), await pg_counters(db)
                cpu_before = postgres_cpu_s(home.parent)
                result = await paced(redis, db, settings, stub, telemetry, pacing,
                                     first_user=10_000 + 1000 * i, seed=args.seed)
                r_after, p_after = await redis_counters(redis), await pg_counters(db)
                pg_cpu = postgres_cpu_s(home.parent) - cpu_before
                r, p = redis_delta(r_before, r_after), await pg_delta(db, p_before, p_after)
                runs = max(result.runs, 1)
                out["paced"].append({
                    **asdict(result.pacing), "handovers": result.handovers,
                    "jobs_queued": result.jobs_queued, "runs": result.runs,
                    "ratio": result.ratio, "seconds": result.seconds,
                    # Hand-overs, jobs and the worker's polls together, per hand-over:
                    "redis_cpu_ms_per_handover": 1000 * r.cpu_s / result.handovers,
                    "redis_commands_per_handover": r.total_calls / result.handovers,
                    "pg_cpu_ms_per_run": 1000 * pg_cpu / runs,
                    "wal_bytes_per_run": p.wal_bytes / runs,
                    "pg_rows_per_run": p.rows_written / runs,
                    "fact_rows_per_run": p.rows.get("memory_fact", (0, 0, 0))[0] / runs})
    finally:
        await db.close()
        await redis.aclose()
        telemetry.shutdown()
    return out


def unit_costs(raw: dict[str, Any]) -> UnitCosts:
    first, follow, job, fact = raw["first"], raw["follow_up"], raw["job"], raw["fact"]
    inserted = job["pg_rows_by_table"].get("memory_fact", [0, 0, 0])[0]
    return UnitCosts(
        redis_cpu_ms_per_handover=(first["cpu_ms"] + follow["cpu_ms"]) / 2,
        redis_cpu_ms_per_job=job["redis_cpu_ms"],
        redis_bytes_per_pending_session=first["used_memory"],
        pg_cpu_ms_per_job=job["pg_cpu_ms"], pg_commit_ms=job["persist_ms_p50"],
        pg_wal_bytes_per_job=job["wal_bytes"],
        pg_rows_per_job=job["pg_rows"],
        bytes_per_fact=(fact["heap"] + fact["toast"] + fact["indexes"]) / fact["rows"],
        facts_added_per_job=inserted,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    if args.report is not None:
        try:
            print(render(json.loads(args.report.read_text())))
        except (OSError, ValueError, KeyError) as exc:
            print(f"python -m bench.unit_costs: cannot read {args.report}: {exc!r}",
                  file=sys.stderr)
            return 2
        return 0
    configure_logging("WARNING")
    began = time.perf_counter()
    load_start = os.getloadavg()
    with throwaway_servers(durable=True) as servers, StubServer(dim=jobs.EMBED_DIM) as stub, \
            asyncio.Runner(loop_factory=new_event_loop) as runner:
        raw = runner.run(_bench(args, servers.database_url, servers.redis_url,
                                servers.root / "home", stub))
    raw["max_jobs"] = [] if args.quick else [
        _max_jobs(latency, slots, args.max_jobs_jobs) for latency, slots in MAX_JOBS_RUNS]
    raw["load"] = {"start": load_start, "end": os.getloadavg(), "cpus": os.cpu_count()}
    raw["args"] = vars(args) | {"json": str(args.json) if args.json else None}
    raw["seconds"] = time.perf_counter() - began
    raw["unit_costs"] = asdict(unit_costs(raw))
    for part in ("first", "follow_up"):
        raw[part].pop("job_ids", None)
    print(render(raw))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(raw, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
