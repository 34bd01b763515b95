"""The measurements as a markdown report (printed, and written to docs/bench/results.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.lib.phases import JobSample, PhaseResult
from bench.lib.stats import dist_cells, ms, pct, table
from bench.lib.workload import CANDIDATES_PER_JOB, EXPECTED_MIX, SEEDED_FACTS

TARGET_P50_MS = 10.0  # issue 16: the non-LLM time per job
TARGET_JOBS_PER_S = 50.0
STAGE_ORDER = ("lock", "cursor", "extract", "embed", "consolidate", "summary", "persist")
TOTALS_PANEL = f"totals per job (dashed: the {TARGET_P50_MS:g} ms p50 target)"
_DIST = ["p50 ms", "p95 ms", "p99 ms", "mean ms", "n"]
_MIX_KEYS = ("added", "updated", "deleted", "unchanged")

Series = dict[str, list[float]]


@dataclass(slots=True)
class BenchResults:
    setup: list[str]
    seq: PhaseResult
    prod: PhaseResult
    burst: PhaseResult
    warmup_jobs: int
    active_after: tuple[int, int] = (0, 0)


def _names(samples: Sequence[JobSample], of: Callable[[JobSample], dict[str, float]]) -> list[str]:
    seen = {name for s in samples for name in of(s)}
    return [n for n in STAGE_ORDER if n in seen] + sorted(seen - set(STAGE_ORDER))


def outside_parts(samples: Sequence[JobSample]) -> Series:
    """Per stage, its span less its provider calls; other spans; the job around the stages."""
    out: Series = {}
    others = _names(samples, lambda s: s.timing.other)
    for stage in _names(samples, lambda s: s.timing.stages):
        out[stage] = [v for s in samples
                      if (v := s.timing.stage_less_provider(stage)) is not None]
        for name in [n for n in others if n.startswith(f"{stage}: ")]:
            out[f"  {name}"] = [s.timing.other[name] for s in samples if name in s.timing.other]
            others.remove(name)
    for name in others:
        out[name] = [s.timing.other[name] for s in samples if name in s.timing.other]
    out["job outside its stages"] = [s.timing.job_ms - sum(s.timing.stages.values())
                                     for s in samples]
    return out


def provider_parts(samples: Sequence[JobSample]) -> Series:
    return {stage: [s.timing.provider[stage] for s in samples if stage in s.timing.provider]
            for stage in _names(samples, lambda s: s.timing.provider)}


def total_parts(samples: Sequence[JobSample]) -> Series:
    return {
        "outside the LLM (job span less provider calls)":
            [s.timing.outside_llm_ms for s in samples],
        "provider calls": [s.timing.provider_ms for s in samples],
        "job span (CONSUMER)": [s.timing.job_ms for s in samples],
        "ARQ after the job (result bookkeeping)": [s.arq_after_ms for s in samples],
    }


def _section(title: str, series: Series) -> list[list[str]]:
    rows = [[f"**{title}**", "", "", "", "", ""]]
    return rows + [[label, *dist_cells(values)] for label, values in series.items() if values]


def service_table(phase: PhaseResult) -> str:
    rows = (_section("outside the LLM, by stage (stage span less its provider calls)",
                     outside_parts(phase.samples))
            + _section("offline provider calls, by stage (a model's place)",
                       provider_parts(phase.samples))
            + _section("totals", total_parts(phase.samples)))
    return table(["part", *_DIST], rows)


def queue_table(results: BenchResults) -> str:
    seq, prod, burst = results.seq.samples, results.prod.samples, results.burst.samples
    rows = [
        ["hand-over call, worker idle", *dist_cells([s.handed.call_ms for s in seq])],
        ["hand-over call, queue filling", *dist_cells([s.handed.call_ms for s in burst])],
        [f"pick-up, poll_delay={results.prod.poll_delay_s:g} s, random arrival",
         *dist_cells([s.pickup_ms for s in prod])],
        [f"pick-up, poll_delay={results.seq.poll_delay_s:g} s, right after the previous job",
         *dist_cells([s.pickup_ms for s in seq])],
        ["ARQ after the job (span end -> after_job_end)",
         *dist_cells([s.arq_after_ms for s in seq])],
    ]
    return table(["part", *_DIST], rows)


def throughput_table(phase: PhaseResult) -> str:
    jobs = len(phase.samples)
    span = [s.timing.job_ms for s in phase.samples]
    outside = [s.timing.outside_llm_ms for s in phase.samples]
    row = [phase.name, str(phase.max_jobs), str(jobs), f"{phase.wall_s:.1f}",
           f"{phase.jobs_per_s:.1f}",
           f"{ms(pct(span, 50))} / {ms(pct(span, 95))} / {ms(pct(span, 99))}",
           ms(pct(outside, 50)), ms(1000 * phase.cpu_s / jobs) if jobs else "-"]
    return table(["run", "max_jobs", "jobs", "drain s", "jobs/s",
                  "job span p50/p95/p99 ms (loaded)", "outside the LLM p50 ms (loaded)",
                  "this process CPU ms/job"], [row])


def check_table(phases: Sequence[PhaseResult]) -> str:
    """What memory_run says each job did: the candidate count is verified, not assumed."""
    planned = tuple(EXPECTED_MIX[k] for k in _MIX_KEYS)
    rows = []
    for phase in phases:
        found = [s.audit for s in phase.samples if s.audit]
        outcomes = Counter(str(a["outcome"]) for a in found)
        candidates = Counter(int(a["candidates"]) for a in found)
        rows.append([
            phase.name, str(len(phase.samples)),
            ", ".join(f"{k} x{v}" for k, v in sorted(outcomes.items())) or "-",
            ", ".join(f"{k} x{v}" for k, v in sorted(candidates.items())) or "-",
            f"{sum(1 for a in found if tuple(int(a[k]) for k in _MIX_KEYS) == planned)}"
            f"/{len(found)}",
            "/".join(str(sum(int(a[k]) for a in found)) for k in _MIX_KEYS),
            str(sum(int(a["rejected"]) for a in found)),
            str(sum(1 for a in found if int(a["consolidation_attempts"]) > 1)),
            str(len(phase.samples) - len(found)),
        ])
    return table(["run", "jobs", "outcome", "candidates per job",
                  "jobs with the planned " + "/".join(map(str, planned)),
                  "added/updated/deleted/unchanged", "rejected", "jobs with >1 consolidation",
                  "no audit row"], rows)


def targets_table(results: BenchResults) -> str:
    p50 = pct([s.timing.outside_llm_ms for s in results.seq.samples], 50)
    p95 = pct([s.timing.outside_llm_ms for s in results.seq.samples], 95)
    rate = results.burst.jobs_per_s
    rows = [
        ["p50 per job outside the LLM (one at a time)", f"<= {TARGET_P50_MS:g} ms",
         f"{ms(p50)} ms (p95 {ms(p95)} ms)", "PASS" if p50 <= TARGET_P50_MS else "FAIL"],
        ["jobs/s, one worker process (burst drain)", f">= {TARGET_JOBS_PER_S:g}",
         f"{rate:.1f}", "PASS" if rate >= TARGET_JOBS_PER_S else "FAIL"],
    ]
    return table(["target", "goal", "measured", "result"], rows)


def render(results: BenchResults, plot_note: str) -> str:
    seq = results.seq
    return "\n".join([
        "# memfleet worker bench", "", *(f"- {line}" for line in results.setup), "",
        "## Targets", "", targets_table(results), "",
        f"## 1. One job at a time ({seq.name})", "",
        f"{len(seq.samples)} jobs, each handed over to an idle worker (poll_delay"
        f" {seq.poll_delay_s:g} s) and finished before the next, after"
        f" {results.warmup_jobs} uncounted warm-up jobs. Every figure comes from the job's"
        " own spans: a stage is its memfleet.<stage> span less the gen_ai provider-call spans"
        " inside it; \"outside the LLM\" is the job's CONSUMER span less all its provider"
        " calls. ARQ's fetch before the job and its result bookkeeping after it are outside"
        " the job's span; the latter is shown from ARQ's after_job_end hook.", "",
        service_table(seq), "",
        f"This process (worker and bench) used {ms(1000 * seq.cpu_s / len(seq.samples))} ms"
        " of CPU per job." if seq.samples else "", "",
        "## 2. Queue", "", queue_table(results), "",
        "## 3. Throughput of one worker process", "",
        "All sessions are handed over first, then one burst worker (build_worker, burst=True,"
        " default max_jobs) drains the queue. jobs/s = jobs / (first job start to last job"
        " done). Under load the jobs share one event loop, so a job's span includes waiting"
        " for the others.", "",
        throughput_table(results.burst), "",
        "## Checks", "",
        "From the memory_run rows of every measured job. The plan per job is"
        f" {CANDIDATES_PER_JOB} candidates: 2 ADD, 5 UPDATE, 2 DELETE, 1 NONE; a job off the"
        " plan is one where the hashing embedder did not rank the fact to replace among the"
        " candidate's neighbours, so the rules consolidator added instead (what an offline"
        " embedder does, not an error).", "",
        check_table([results.seq, results.prod, results.burst]), "",
        f"Active facts per user after all runs: min {results.active_after[0]},"
        f" max {results.active_after[1]} (seeded: {SEEDED_FACTS}).", "",
        plot_note, "",
    ])


def plot_panels(results: BenchResults) -> dict[str, Series]:
    totals = total_parts(results.seq.samples)
    totals["job span under load (burst)"] = [s.timing.job_ms for s in results.burst.samples]
    return {
        f"outside the LLM, per job, by stage ({results.seq.name})":
            outside_parts(results.seq.samples),
        "offline provider calls, per job, by stage": provider_parts(results.seq.samples),
        TOTALS_PANEL: totals,
    }
