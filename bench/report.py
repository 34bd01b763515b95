"""Turn the measurements into the markdown report (printed and written to bench/results.md)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.phases import Isolated, JobSample, PhaseResult, RoundTrips
from bench.stats import dist_cells, ms, pct, table
from bench.workload import EXPECTED_MIX

TARGET_P50_MS = 15.0
TARGET_JOBS_PER_S = 50.0
AUDIT_STAGES = ("lock", "cursor", "extract", "embed", "consolidate", "persist", "summary")
_DIST_HEADERS = ["p50 ms", "p95 ms", "p99 ms", "mean ms", "n"]
NOISY_SHARE = 0.10  # above this, other processes' CPU use is called out
_MIX_KEYS = ("added", "updated", "deleted", "unchanged")
TOTALS_PANEL = "totals per job (dashed: the 15 ms p50 target)"


@dataclass(slots=True)
class BenchResults:
    setup: list[str]
    seq: PhaseResult
    prod_idle: PhaseResult
    burst: PhaseResult
    isolated: Isolated
    round_trips: RoundTrips
    cpus: int
    nd_seq: PhaseResult | None = None
    nd_burst: PhaseResult | None = None
    active_after: tuple[int, int] = (0, 0)
    durability: dict[str, dict[str, str]] = field(default_factory=dict)
    warmup_jobs: int = 0
    library_warnings: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------- per-job parts

Part = Callable[[JobSample], float | None]


def _stage(name: str) -> Part:
    return lambda s: s.stages.get(name)


def _less_provider(name: str) -> Part:
    def part(s: JobSample) -> float | None:
        if name not in s.stages:
            return None
        return s.stages[name] - s.provider.get(name, 0.0)
    return part


def _provider(name: str) -> Part:
    return lambda s: s.provider.get(name)


def _span(name: str) -> Part:
    return lambda s: s.spans.get(name)


NEIGHBOR_SPAN = "SELECT memory_fact"  # the worker's span around the neighbour query, if any


def _glue(s: JobSample) -> float:
    return sum(s.stages.get(n, 0.0) - s.provider.get(n, 0.0) for n in ("extract", "embed"))


def _job_other(s: JobSample) -> float:
    return s.function_ms - sum(s.stages.values())


def _arq(s: JobSample) -> float:
    return s.run_job_ms - s.function_ms


def values(samples: Sequence[JobSample], part: Part) -> list[float]:
    return [v for v in (part(s) for s in samples) if v is not None]


# (label, what it is, how to get it per job); None as the getter marks a heading row.
INFRA_PARTS: list[tuple[str, str, Part | None]] = [
    ("lock", "claim Lua: hand-over read + SET NX PX, keep-alive task", _stage("lock")),
    ("cursor", "load_cursor SELECT + locate", _stage("cursor")),
    ("consolidate, less rules call", "neighbour query + build_request + validate/plan",
     _less_provider("consolidate")),
    ("  neighbour query, in the job", f"the job's {NEIGHBOR_SPAN!r} span",
     _span(NEIGHBOR_SPAN)),
    ("persist", "the one write transaction (COMMIT = WAL flush)", _stage("persist")),
    ("summary, less rules call", "request building, jobs where due (stored by persist)",
     _less_provider("summary")),
    ("extract/embed glue", "request building, candidates_from, checks", _glue),
    ("job other", "decode payload + lock release + outcome", _job_other),
    ("ARQ bookkeeping", "run_job minus the job function (Redis pipelines)", _arq),
]
PROVIDER_PARTS: list[tuple[str, str, Part | None]] = [
    ("rules extract", "offline extractor call", _provider("extract")),
    ("hashing embed", "10 texts, 1536 dims", _provider("embed")),
    ("rules consolidate", "offline consolidator call", _provider("consolidate")),
    ("rules summary", "offline summarizer call, jobs where due", _provider("summary")),
]
TOTAL_PARTS: list[tuple[str, str, Part | None]] = [
    ("infrastructure per job", "run_job minus provider calls: the job outside the LLM",
     lambda s: s.infra_ms),
    ("offline providers per job", "sum of the provider calls", lambda s: s.provider_ms),
    ("job function", "the job's CONSUMER span, claim to return", lambda s: s.function_ms),
    ("whole job (ARQ run_job)", "fetch + function + result bookkeeping",
     lambda s: s.run_job_ms),
]


def _part_rows(samples: Sequence[JobSample],
               parts: Sequence[tuple[str, str, Part | None]]) -> list[list[str]]:
    return [[label, what, *dist_cells(values(samples, part))]
            for label, what, part in parts if part is not None]


def _iso_rows(iso: Isolated) -> list[list[str]]:
    return [
        ["  neighbour query, alone", "PgMemoryStore.neighbors alone, 10 embeddings, k=5",
         *dist_cells(iso.neighbors)],
        ["  build_request", "consolidate.build_request alone (pure Python)",
         *dist_cells(iso.build_request)],
        ["  validate + plan_writes", "alone (pure Python)", *dist_cells(iso.validate_plan)],
        ["  (rules decide)", "the offline call, alone, for comparison",
         *dist_cells(iso.rules_decide)],
    ]


def service_table(phase: PhaseResult, iso: Isolated | None) -> str:
    headers = ["part", "what", *_DIST_HEADERS]
    rows: list[list[str]] = [["**outside the LLM**", "", "", "", "", "", ""]]
    for label, what, part in INFRA_PARTS:
        found = values(phase.samples, part) if part is not None else []
        if found:  # a span this version of the worker does not open has no row
            rows.append([label, what, *dist_cells(found)])
        if label.startswith("  neighbour") and iso is not None:
            rows += _iso_rows(iso)
    rows.append(["**offline providers** (a model's place)", "", "", "", "", "", ""])
    rows += _part_rows(phase.samples, PROVIDER_PARTS)
    rows.append(["**totals**", "", "", "", "", "", ""])
    rows += _part_rows(phase.samples, TOTAL_PARTS)
    return table(headers, rows)


def queue_table(seq: PhaseResult, prod: PhaseResult, burst: PhaseResult,
                rt: RoundTrips) -> str:
    dispatch = [s.dispatch_ms for s in seq.samples if s.dispatch_ms is not None]
    rows = [
        ["hand-over call, worker idle", "schedule_memory_persistence: one EVAL",
         *dist_cells([s.handed.call_ms for s in seq.samples])],
        ["hand-over call, queue filling", "the same, calls back to back",
         *dist_cells([s.handed.call_ms for s in burst.samples])],
        [f"pick-up, poll_delay={prod.poll_delay_s:g} s",
         "hand-over returned -> job function; production non-burst poll, random arrival",
         *dist_cells([s.pickup_ms for s in prod.samples])],
        ["ARQ dispatch", "the poll that found the job -> job function (idle worker)",
         *dist_cells(dispatch)],
        ["ARQ bookkeeping", "run_job minus the job function",
         *dist_cells([_arq(s) for s in seq.samples])],
        ["(unit) PostgreSQL round trip", "SELECT 1 on one asyncpg connection",
         *dist_cells(rt.pg_ms)],
        ["(unit) Redis round trip", "PING on redis.asyncio", *dist_cells(rt.redis_ms)],
    ]
    return table(["part", "what", *_DIST_HEADERS], rows)


def _other_share(phase: PhaseResult, cpus: int) -> float:
    """The part of the machine's CPU time that processes other than the bench's used."""
    span = phase.total_s * cpus
    return phase.cpu_s.get("other processes", 0.0) / span if span else 0.0


def throughput_table(phases: Sequence[PhaseResult], cpus: int) -> str:
    rows = []
    for phase in phases:
        jobs = len(phase.samples)
        per_job = {k: v / jobs * 1000 for k, v in phase.cpu_s.items()} if jobs else {}
        run = [s.run_job_ms for s in phase.samples]
        rows.append([
            phase.name, str(phase.max_jobs), str(jobs), f"{phase.wall_s:.1f}",
            f"{phase.jobs_per_s:.1f}",
            f"{ms(pct(run, 50))} / {ms(pct(run, 95))} / {ms(pct(run, 99))}",
            ms(per_job.get("worker process", math.nan)), ms(per_job.get("postgres", math.nan)),
            ms(per_job.get("redis", math.nan)),
            f"{1000 / per_job['worker process']:.0f}" if per_job.get("worker process") else "-",
            f"{phase.pg_queries / jobs:.1f}" if jobs else "-",
            f"{100 * _other_share(phase, cpus):.0f}%",
        ])
    headers = ["run", "max_jobs", "jobs", "drain s", "jobs/s", "job p50/p95/p99 ms (loaded)",
               "worker CPU ms/job", "postgres CPU ms/job", "redis CPU ms/job",
               "CPU-bound ceiling jobs/s", "PG statements/job", "CPU used by others"]
    return table(headers, rows)


def check_table(phases: Sequence[PhaseResult]) -> str:
    """What memory_run says each job did: the candidate count is verified, not assumed."""
    planned = tuple(EXPECTED_MIX[k] for k in _MIX_KEYS)
    rows = []
    for phase in phases:
        audits = [s.audit for s in phase.samples]
        found = [a for a in audits if a]
        outcomes = Counter(str(a["outcome"]) for a in found)
        candidates = Counter(int(a["candidates"]) for a in found)
        on_plan = sum(1 for a in found if tuple(int(a[k]) for k in _MIX_KEYS) == planned)
        totals = "/".join(str(sum(int(a[k]) for a in found)) for k in _MIX_KEYS)
        rows.append([
            phase.name, str(len(audits)),
            ", ".join(f"{k} x{v}" for k, v in sorted(outcomes.items())) or "-",
            ", ".join(f"{k} x{v}" for k, v in sorted(candidates.items())) or "-",
            f"{on_plan}/{len(found)}", totals,
            str(sum(int(a["rejected"]) for a in found)),
            str(sum(1 for a in found if int(a["consolidation_attempts"]) > 1)),
            str(len(audits) - len(found)),
        ])
    headers = ["run", "jobs", "outcome", "candidates per job (memory_run)",
               "jobs with the planned " + "/".join(str(n) for n in planned),
               "added/updated/deleted/unchanged, total", "rejected",
               "jobs with >1 consolidation", "no audit row"]
    return table(headers, rows)


def audit_crosscheck(phase: PhaseResult) -> str:
    """timings_ms in memory_run against the spans: same clock, so they should agree."""
    present: Counter[str] = Counter()
    gaps: dict[str, list[float]] = {}
    for s in phase.samples:
        raw = s.audit.get("timings")
        timings: dict[str, Any] = json.loads(raw) if raw else {}
        for key in AUDIT_STAGES:
            if key in timings:
                present[key] += 1
                if key in s.stages:
                    gaps.setdefault(key, []).append(abs(float(timings[key]) - s.stages[key]))
    jobs = len(phase.samples)
    rows = [[key, f"{present[key]}/{jobs}",
             ms(pct(gaps[key], 50)) if key in gaps else "-",
             str(sum(1 for s in phase.samples if key in s.stages))]
            for key in AUDIT_STAGES]
    return table(["stage", "in memory_run.timings_ms", "median |audit - span| ms",
                  "jobs with the span"], rows)


def targets_table(results: BenchResults) -> tuple[str, list[str]]:
    p50 = pct([s.infra_ms for s in results.seq.samples], 50)
    rate = results.burst.jobs_per_s
    rows = [
        ["p50 per job outside the LLM (durable=True, one at a time)", f"<= {TARGET_P50_MS:g} ms",
         f"{ms(p50)} ms", "PASS" if p50 <= TARGET_P50_MS else "FAIL"],
        ["jobs/s, one worker process (durable=True, burst drain)",
         f">= {TARGET_JOBS_PER_S:g}", f"{rate:.1f}",
         "PASS" if rate >= TARGET_JOBS_PER_S else "FAIL"],
    ]
    verdicts = [r[3] for r in rows]
    if results.nd_seq is not None and results.nd_burst is not None:
        nd_p50 = pct([s.infra_ms for s in results.nd_seq.samples], 50)
        rows.append(["(info) the same p50 with durable=False", f"<= {TARGET_P50_MS:g} ms",
                     f"{ms(nd_p50)} ms", "pass" if nd_p50 <= TARGET_P50_MS else "fail"])
        nd_rate = results.nd_burst.jobs_per_s
        rows.append(["(info) jobs/s with durable=False", f">= {TARGET_JOBS_PER_S:g}",
                     f"{nd_rate:.1f}", "pass" if nd_rate >= TARGET_JOBS_PER_S else "fail"])
    return table(["target", "goal", "measured", "result"], rows), verdicts


def _phase_note(phase: PhaseResult, cpus: int) -> str:
    jobs = len(phase.samples)
    per_job = phase.pg_queries / jobs if jobs else math.nan
    other = _other_share(phase, cpus)
    cpu = {k: v / jobs * 1000 for k, v in phase.cpu_s.items()} if jobs else {}
    note = (f"PostgreSQL statements per job (asyncpg's count, BEGIN/COMMIT and pool resets"
            f" included): {per_job:.1f}. CPU per job: worker process"
            f" {ms(cpu.get('worker process', math.nan))} ms, PostgreSQL"
            f" {ms(cpu.get('postgres', math.nan))} ms, Redis {ms(cpu.get('redis', math.nan))} ms"
            f" (this process also runs the poll loop and the bench's hand-over calls)."
            f" Worker poll_delay {phase.poll_delay_s:g} s. Other"
            f" processes on this machine used {100 * other:.0f}% of its {cpus} CPUs meanwhile"
            f" (VM steal {phase.cpu_s.get('steal', 0.0):.1f} CPU-s).")
    if other > NOISY_SHARE:
        note += (" **Warning: the machine was busy with other work; these latencies are"
                 " pessimistic. Re-run on a quiet machine.**")
    return note


def render(results: BenchResults, plot_note: str) -> str:
    seq, burst = results.seq, results.burst
    targets, _ = targets_table(results)
    out = ["# memfleet worker bench", "", *(f"- {line}" for line in results.setup), ""]
    out += ["## Targets", "", targets, ""]
    noisy = [p.name for p in (seq, burst, results.nd_seq, results.nd_burst)
             if p is not None and _other_share(p, results.cpus) > NOISY_SHARE]
    if noisy:
        out += [f"**Warning: other processes used over {100 * NOISY_SHARE:.0f}% of the CPUs"
                f" during: {', '.join(noisy)}. Numbers from a shared machine are pessimistic.**",
                ""]
    out += [
        f"## 1. One job at a time: {seq.name}", "",
        f"{len(seq.samples)} jobs, each handed over to an idle worker and finished before the"
        f" next (after {results.warmup_jobs} warm-up jobs, not counted). Stage times come from"
        " the job's own spans; provider calls are timed inside them and subtracted, so"
        " \"outside the LLM\" is the worker's own time. The indented rows time parts of the"
        " consolidate stage alone, one call at a time over the same users"
        f" ({len(results.isolated.neighbors)} calls, {results.isolated.candidates} candidate"
        f" embeddings each, {_facts_phrase(results.isolated.active_facts)}).", "",
        service_table(seq, results.isolated), "",
        _phase_note(seq, results.cpus), "",
        "## 2. Queue overhead", "",
        queue_table(seq, results.prod_idle, burst, results.round_trips), "",
        "## 3. Throughput of one worker process", "",
        "All sessions are handed over first, then one in-process burst worker (worker_options,"
        " burst=True, default max_jobs) drains the queue. jobs/s = jobs / (first job start to"
        " last job end). Under load ten jobs share one event loop, so a job's wall time includes"
        " waiting for the others. CPU per job is over the drain: this process (the worker),"
        " the PostgreSQL server (all backends) and Redis. The CPU-bound ceiling is 1000 / the"
        " worker's CPU ms per job: the most one Python process can do with a core to itself,"
        " whatever else the machine is doing.", "",
        throughput_table([p for p in (burst, results.nd_burst) if p is not None],
                         results.cpus), "",
    ]
    if results.nd_seq is not None:
        out += [
            f"## 4. One job at a time: {results.nd_seq.name}", "",
            service_table(results.nd_seq, None), "",
            _phase_note(results.nd_seq, results.cpus), "",
        ]
    out += [
        "## Checks", "",
        "From the memory_run audit rows of every measured job. The plan per job is 2 ADD,"
        " 5 UPDATE, 2 DELETE, 1 NONE; a job off the plan is one where the hashing embedder"
        " did not rank the fact to replace among the candidate's k=5 neighbours, so the rules"
        " consolidator added instead of updating (what an offline embedder does, not an"
        " error).", "",
        check_table([p for p in (seq, results.prod_idle, burst, results.nd_seq,
                                 results.nd_burst) if p is not None]), "",
        f"Active facts per user after all runs: min {results.active_after[0]},"
        f" max {results.active_after[1]} (seeded: 200).", "",
        f"memory_run.timings_ms against the spans ({seq.name}):", "",
        audit_crosscheck(seq), "",
    ]
    if results.durability:
        out += ["PostgreSQL settings per run: " + "; ".join(
            f"{name}: " + ", ".join(f"{k}={v}" for k, v in s.items())
            for name, s in results.durability.items()) + ".", ""]
    if results.library_warnings:
        out += ["Warnings logged by OpenTelemetry during the run (counted, not printed):", ""]
        out += [f"- {count} x {message}"
                for message, count in sorted(results.library_warnings.items())]
        out += [""]
    out += [plot_note, ""]
    return "\n".join(out)


def _facts_phrase(counts: Sequence[int]) -> str:
    if not counts:
        return "no users"
    if min(counts) == max(counts):
        return f"{counts[0]} active facts per user"
    return f"{min(counts)}-{max(counts)} active facts per user"


def plot_panels(results: BenchResults) -> dict[str, dict[str, list[float]]]:
    seq = results.seq.samples
    infra = {label.strip(): values(seq, part) for label, _, part in INFRA_PARTS
             if part is not None and values(seq, part)}
    infra["neighbour query (alone)"] = list(results.isolated.neighbors)
    infra["build_request (alone)"] = list(results.isolated.build_request)
    providers = {label: values(seq, part) for label, _, part in PROVIDER_PARTS
                 if part is not None}
    totals = {label: values(seq, part) for label, _, part in TOTAL_PARTS if part is not None}
    totals["ARQ dispatch"] = [s.dispatch_ms for s in seq if s.dispatch_ms is not None]
    totals["whole job under load (burst)"] = [s.run_job_ms for s in results.burst.samples]
    return {
        f"outside the LLM, per job ({results.seq.name})": infra,
        "offline providers, per job": providers,
        TOTALS_PANEL: totals,
    }
