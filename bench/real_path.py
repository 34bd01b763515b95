"""``make bench``: a job on the real model path, and where its time goes.

The worker runs with MEMFLEET_LLM_PROVIDER=openai and
MEMFLEET_EMBED_PROVIDER=openai: the real ``openai`` client over HTTP, against
bench.lib.real_stub, a zero-latency OpenAI-compatible endpoint in a process of its
own whose answers are the project's stub's (the rules provider and the hashing
embedder, so the workload yields what bench.run's does). Throwaway PostgreSQL
(durable=True) and Redis as in bench.run; every user is seeded with 200
active facts through the same path, and each measured job gets a slice that
yields 10 candidates (bench.lib.workload), one job at a time.

Time per job comes from the job's spans (bench.lib.spans); inside the provider
calls, bench.lib.real_probe times the HTTP round trip, the client's request
building and JSON serialisation, its response processing, and memfleet's own
request building and answer parsing; the stub reports the time it spent
handling the requests and the connections it saw.

    .venv/bin/python -m bench.real_path [--users 20] [--jobs 200] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import platform
import pstats
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.lib import jobs, phases, workload
from bench.lib.proc import cpu_s, load_1min
from bench.lib.real_probe import PIECES, Probe
from bench.lib.real_stub import STATS_PATH
from bench.lib.servers import Servers, throwaway_servers
from bench.lib.spans import JobSpans
from bench.lib.stats import dist_cells, mean, ms, pct, table
from worker.config import Settings
from worker.fleet.app import build_worker, new_event_loop
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

RESULTS_DIR = Path(__file__).resolve().parents[1] / "docs" / "bench"
# A tenth of mem0 1.0.9's time per turn in issue 16 (491.6 ms p50, same stub idea).
TARGET_JOB_P50_MS = 49.2
STAGES = ("lock", "cursor", "extract", "embed", "consolidate", "summary", "persist")
_DIST = ["p50 ms", "p95 ms", "p99 ms", "mean ms", "n"]


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.real_path", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=20, help="seeded users (200 facts each)")
    parser.add_argument("--jobs", type=int, default=200, help="measured one-at-a-time jobs")
    parser.add_argument("--warmup", type=int, default=20, help="uncounted jobs before timing")
    parser.add_argument("--idle-jobs", type=int, default=3,
                        help="jobs after a pause, to count the connections they reopen")
    parser.add_argument("--idle-gap", type=float, default=6.0,
                        help="the pause before each of those (s); httpx keeps an idle"
                        " connection 5 s")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", type=Path, default=None,
                        help="also cProfile the measured jobs; the stats go to this file")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "real_path.md")
    return parser.parse_args(argv)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(method: str, url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, method=method)  # noqa: S310 - our own loopback URL
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
        found: dict[str, Any] = json.loads(response.read())
        return found


@contextlib.contextmanager
def stub_process(dim: int) -> Iterator[tuple[str, int]]:
    """bench.lib.real_stub in its own process: (base URL, pid), stopped whatever happens."""
    port = _free_port()
    proc = subprocess.Popen(  # noqa: S603 - this interpreter, a module of ours
        [sys.executable, "-m", "bench.lib.real_stub", "--port", str(port), "--dim", str(dim)])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                _http("GET", url + STATS_PATH)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the bench stub did not start") from None
                time.sleep(0.05)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _bench(args: argparse.Namespace, servers: Servers, stub_url: str,
                 stub_pid: int) -> list[str]:
    began, load_at_start = time.perf_counter(), load_1min()
    count = args.warmup + args.jobs
    total = count + 1 + args.idle_jobs  # one more: the idle phase's worker starting
    if total > args.users * workload.MAX_JOBS_PER_USER:
        raise SystemExit(f"{total} jobs need more than {args.users} users")
    every = list(workload.sessions(args.seed, args.users, total))
    plans, idle_plans = every[:count], every[count:]
    settings = Settings(
        database_url=servers.database_url, redis_url=servers.redis_url,
        home_dir=servers.root / "home", llm_provider="openai", embed_provider="openai",
        llm_base_url=stub_url + "/v1", embed_base_url=stub_url + "/v1",
        embed_model="text-embedding-3-small", embed_dim=jobs.EMBED_DIM,
    )
    spans = JobSpans()
    bench = phases.Bench(settings, setup_telemetry(settings, span_exporter=spans), spans,
                         Redis.from_url(servers.redis_url))
    probe = Probe()
    profiler = cProfile.Profile() if args.profile else None
    try:
        await migrate(servers.database_url, embed_dim=jobs.EMBED_DIM)
        print(f"seeding {args.users} users x {workload.SEEDED_FACTS} facts through the stub ...",
              file=sys.stderr)
        await jobs.seed(bench.redis, settings, bench.telemetry, seed=args.seed,
                        users=args.users, plans=every)
        seeded = await jobs.settle(servers.database_url)
        spans.jobs.clear()
        _http("DELETE", stub_url + STATS_PATH)
        stub_cpu = -cpu_s(stub_pid)
        print(f"{count} jobs one at a time ...", file=sys.stderr)
        with probe.installed() as wrapped:
            if profiler is not None:
                profiler.enable()
            phase = await phases.one_at_a_time("real path", bench, plans,
                                               poll_delay_s=0.05, warmup=args.warmup)
            if profiler is not None:
                profiler.disable()
        stub_cpu += cpu_s(stub_pid)
        stub = _http("GET", stub_url + STATS_PATH)
        await phases.attach_audit(servers.database_url, phase.samples)
        print(f"{args.idle_jobs} jobs, each after {args.idle_gap:g} s idle ...", file=sys.stderr)
        reopened = await _after_pauses(bench, idle_plans, args.idle_gap, stub_url)
    finally:
        await bench.redis.aclose()
        bench.telemetry.shutdown()
    if profiler is not None:
        profiler.dump_stats(str(args.profile))
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    setup = [
        f"machine: {os.cpu_count()} CPUs, Linux {platform.release()}, Python"
        f" {platform.python_version()}; the worker in this process, the stub in its own",
        "providers: MEMFLEET_LLM_PROVIDER=openai, MEMFLEET_EMBED_PROVIDER=openai, embed_dim"
        f" {jobs.EMBED_DIM}, the openai client over HTTP to bench.lib.real_stub (zero latency)",
        f"data: {args.users} users, active facts per user after seeding {seeded[0]}-{seeded[1]};"
        f" {len(phase.samples)} measured jobs one at a time after {args.warmup} uncounted,"
        " each with a slice of 10 candidates; tracing on (the bench's span exporter)",
        f"probed: {', '.join(wrapped)}",
        f"bench wall time: {time.perf_counter() - began:.0f} s; load average at the start and"
        f" at the end: {load_at_start} / {load_1min()} (other processes share the machine)",
    ]
    lines = render(setup, phase, probe, stub, stub_cpu, count)
    lines += [f"After a pause of {args.idle_gap:g} s before each of {args.idle_jobs} more jobs"
              f" (one at a time, a new worker started by one uncounted job), the stub saw"
              f" {reopened} connections opened for them"
              f" ({reopened / max(1, args.idle_jobs):.1f} per job).", ""]
    return lines


async def _after_pauses(bench: phases.Bench, plans: Sequence[workload.SessionPlan],
                        gap_s: float, stub_url: str) -> int:
    """Jobs one at a time, each handed over after ``gap_s`` idle: the connections opened."""
    finished = jobs.Finished()
    worker = build_worker(bench.settings, telemetry=bench.telemetry, poll_delay=0.05,
                          handle_signals=False, after_job_end=finished)
    main = asyncio.create_task(worker.main())
    try:
        # One job first: the worker's clients connect at their first call.
        warm = await jobs.hand_over(bench.redis, bench.settings, plans[0])
        await finished.wait(warm.job_id, main)
        _http("DELETE", stub_url + STATS_PATH)
        for plan in plans[1:]:
            await asyncio.sleep(gap_s)
            handed = await jobs.hand_over(bench.redis, bench.settings, plan)
            await finished.wait(handed.job_id, main)
        await jobs.stop(worker, main)
    finally:
        await jobs.close(worker, main)
    return int(_http("GET", stub_url + STATS_PATH)["connections"])


def render(setup: list[str], phase: phases.PhaseResult, probe: Probe, stub: dict[str, Any],
           stub_cpu_s: float, stub_jobs: int) -> list[str]:
    """``stub``: its stats over ``stub_jobs`` jobs (the measured ones and the warm-up)."""
    samples = phase.samples
    timings = [s.timing for s in samples]
    job = [t.job_ms for t in timings]
    provider = [t.provider_ms for t in timings]
    pieces = probe.per_job(timings)
    # The stub's handling counts all the requests of the measured jobs, warm-up included.
    stub_ms = 1000 * stub["handler_s"] / max(1, stub["requests"])
    calls = stub["requests"] / stub_jobs
    p50 = pct(job, 50)
    targets = [
        ["job span p50 (one at a time)", f"<= {TARGET_JOB_P50_MS:g} ms",
         f"{ms(p50)} ms (p95 {ms(pct(job, 95))} ms)",
         "PASS" if p50 <= TARGET_JOB_P50_MS else "FAIL"],
        # One client per endpoint, its connections kept; the summary's call beside the
        # others needs a second connection when they overlap.
        ["connections the stub saw for the measured jobs", "<= 2", str(stub["connections"]),
         "PASS" if stub["connections"] <= 2 else "FAIL"],
    ]
    stage_rows = [[f"{stage} (span, provider calls included)",
                   *dist_cells([t.stages[stage] for t in timings if stage in t.stages])]
                  for stage in STAGES if any(stage in t.stages for t in timings)]
    stage_rows += [[f"  provider calls in {stage}",
                    *dist_cells([t.provider[stage] for t in timings if stage in t.provider])]
                   for stage in STAGES if any(stage in t.provider for t in timings)]
    stage_rows += [["job outside the LLM", *dist_cells([t.outside_llm_ms for t in timings])],
                   ["provider calls, summed (the summary's runs beside the others)",
                    *dist_cells(provider)],
                   ["job span (CONSUMER)", *dist_cells(job)]]
    inside = [[piece, *dist_cells([p.get(piece, 0.0) for p in pieces])] for piece in PIECES]
    rest = [pv - sum(p.values()) for pv, p in zip(provider, pieces, strict=True)]
    inside.append(["the rest of the provider calls (client plumbing, retry, spans)",
                   *dist_cells(rest)])
    inside.append(["provider calls, summed (spans)", *dist_cells(provider)])
    http = mean([p.get(PIECES[0], 0.0) for p in pieces])
    return [
        "# memfleet on the real model path (openai providers, zero-latency stub)", "",
        *(f"- {line}" for line in setup), "",
        "## Targets", "", table(["target", "goal", "measured", "result"], targets), "",
        "## The job by stage (from its spans)", "", table(["part", *_DIST], stage_rows), "",
        "## Inside the provider calls, per job (bench.lib.real_probe)", "",
        table(["part", *_DIST], inside), "",
        f"The stub: {stub['requests']} requests ({calls:.2f} per job), {stub_ms:.3f} ms of"
        f" handling each (mean), {1000 * stub_cpu_s / stub_jobs:.2f} ms of its process's CPU per"
        " job,"
        f" {stub['cache_hits']} answers or vectors served from its cache. Of the HTTP round trip"
        f" ({ms(http)} ms per job, mean), about {ms(stub_ms * calls)} ms is the stub's handling;"
        " the rest is the two HTTP stacks and the loopback. The job span less the stub's"
        f" handling: p50 {ms(p50 - stub_ms * calls)} ms.", "",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    configure_logging("WARNING")
    with throwaway_servers(durable=True) as servers, stub_process(jobs.EMBED_DIM) as stub, \
            asyncio.Runner(loop_factory=new_event_loop) as runner:
        lines = runner.run(_bench(args, servers, *stub))
    report = "\n".join(lines)
    args.out.write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
