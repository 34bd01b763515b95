"""Job latency when the model takes as long as a real one: memory lag, job by job.

The ``openai`` providers against the project's OpenAI-compatible stub, which
answers every chat call after ``--latency-ms`` (each value in turn, 300 then
600 by default) and embeddings at once. Throwaway PostgreSQL (durable=True)
and Redis; the users and sessions of bench.lib.workload, seeded through the same
stub with no delay, so each measured job resumes a session with 10 new
messages, 10 candidates, and a summary due in about half the jobs.

One job at a time (an in-process worker, poll_delay 0.05 s, a few uncounted
warm-up jobs at each latency). The stub runs in a thread of this process.
Per job: from the hand-over call's return to the end of the job's span (the
commit is the job's last step), and the job's span alone. What calls in line
would take is the job's span plus its summary stage (the summary is asked
beside extraction and consolidation; in line it would come after them).

    .venv/bin/python -m bench.model_latency [--latency-ms 300 600] [--jobs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence

from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from bench.lib import jobs, phases, workload
from bench.lib.phases import JobSample
from bench.lib.servers import Servers, throwaway_servers
from bench.lib.spans import JobSpans
from bench.lib.stats import ms, pct, table
from worker.config import Settings
from worker.fleet.app import new_event_loop
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

POLL_DELAY_S = 0.05
WARMUP = 2
# Goal: a job waits for the model calls its decisions need (extraction, then
# consolidation) and not for the summary: with a summary due its p50 is within
# this factor of a job without one.
GOAL_SUMMARY_RATIO = 1.1


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.model_latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=int, nargs="+", default=[300, 600])
    parser.add_argument("--jobs", type=int, default=30, help="measured jobs per latency")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    return parser.parse_args(argv)


def _handover_to_commit_ms(s: JobSample) -> float:
    return (s.timing.end_ns - s.handed.call_end_ns) / 1e6


def _in_line_ms(s: JobSample) -> float:
    return s.timing.job_ms + s.timing.stages.get("summary", 0.0)


def _rows(latency_ms: int, samples: Sequence[JobSample]) -> list[list[str]]:
    rows = []
    lag_p50: dict[bool, float] = {}
    for due in (False, True):
        picked = [s for s in samples if ("summary" in s.timing.stages) is due]
        if not picked:
            continue
        lag = [_handover_to_commit_ms(s) for s in picked]
        lag_p50[due] = pct(lag, 50)
        span = [s.timing.job_ms for s in picked]
        in_line = [_in_line_ms(s) for s in picked]
        embed = [s.timing.provider.get("embed", 0.0) for s in picked]
        goal, result = "-", "-"
        if due and False in lag_p50:
            ratio = lag_p50[True] / lag_p50[False]
            goal = f"<= {GOAL_SUMMARY_RATIO:g} x no summary"
            result = f"{ratio:.2f} x " + ("PASS" if ratio <= GOAL_SUMMARY_RATIO else "FAIL")
        rows.append([
            f"{latency_ms} ms", "due" if due else "not due", str(len(picked)),
            f"{ms(pct(lag, 50))} / {ms(pct(lag, 95))}",
            f"{ms(pct(span, 50))} / {ms(pct(span, 95))}",
            ms(pct(embed, 50)), f"{(3 if due else 2) * latency_ms}", ms(pct(in_line, 50)),
            goal, result,
        ])
    return rows


async def _bench(args: argparse.Namespace, servers: Servers, stub: StubServer
                 ) -> list[list[str]]:
    per_latency = WARMUP + args.jobs
    count = per_latency * len(args.latency_ms)
    if count > args.users * workload.MAX_JOBS_PER_USER:
        raise SystemExit(f"{count} jobs need more users than {args.users}")
    plans = list(workload.sessions(args.seed, args.users, count))
    settings = Settings(
        database_url=servers.database_url, redis_url=servers.redis_url,
        home_dir=servers.root / "home", llm_provider="openai", llm_base_url=stub.v1,
        embed_provider="openai", embed_base_url=stub.v1, embed_dim=jobs.EMBED_DIM,
    )
    spans = JobSpans()
    bench = phases.Bench(settings, setup_telemetry(settings, span_exporter=spans), spans,
                         Redis.from_url(servers.redis_url))
    rows: list[list[str]] = []
    try:
        await migrate(servers.database_url, embed_dim=jobs.EMBED_DIM)
        print(f"seeding {args.users} users through the stub ...", file=sys.stderr)
        await jobs.seed(bench.redis, settings, bench.telemetry, seed=args.seed,
                        users=args.users, plans=plans)
        await jobs.settle(servers.database_url)
        spans.jobs.clear()
        for n, latency in enumerate(args.latency_ms):
            stub.control("DELETE", "/_stub/faults")
            stub.add_fault("latency_ms", latency_ms=latency, count=1_000_000_000, path=CHAT_PATH)
            print(f"{args.jobs} jobs, chat answers in {latency} ms ...", file=sys.stderr)
            phase = await phases.one_at_a_time(
                f"{latency} ms", bench, plans[n * per_latency : (n + 1) * per_latency],
                poll_delay_s=POLL_DELAY_S, warmup=WARMUP)
            rows += _rows(latency, phase.samples)
    finally:
        await bench.redis.aclose()
        bench.telemetry.shutdown()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    configure_logging("WARNING")
    began = time.perf_counter()
    with throwaway_servers(durable=True) as servers, StubServer(dim=jobs.EMBED_DIM) as stub, \
            asyncio.Runner(loop_factory=new_event_loop) as runner:
        rows = runner.run(_bench(args, servers, stub))
    print("# Job latency with a model's latency (this machine's times)")
    print()
    print(f"- openai providers, the project's stub in this process: chat calls answered after"
          f" the latency below, embeddings at once; embed_dim {jobs.EMBED_DIM}; one job at a"
          f" time, poll_delay {POLL_DELAY_S:g} s; {args.users} users x"
          f" {workload.SEEDED_FACTS} facts; wall time {time.perf_counter() - began:.0f} s")
    print("- hand-over -> commit: the hand-over call's return to the end of the job's span;"
          " in line: the job's span plus its summary stage, what the job would take with the"
          " summary asked after consolidation; chat calls in line: the model's share alone")
    print(f"- goal: a job waits for extraction, then consolidation, not for the summary:"
          f" with a summary due, hand-over -> commit p50 at most {GOAL_SUMMARY_RATIO:g} x a job's"
          " without one")
    print()
    print(table(["chat latency", "summary", "jobs", "hand-over -> commit p50 / p95 ms",
                 "job span p50 / p95 ms", "embed call p50 ms", "chat calls in line ms",
                 "in line p50 ms", "goal", "result"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
