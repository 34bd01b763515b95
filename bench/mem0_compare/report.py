"""The side-by-side's report: the table, the goals, the rounds' details."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

OLD_MEM0 = "1.0.9"
# Issue 16: memfleet at least ten times faster than mem0 1.0.9, so about 3.5 times
# the newest mem0 (which does less: one pass, ADD only).
GOAL_VS_OLD = 10.0
GOAL_VS_NEWEST = 3.5


@dataclass(slots=True)
class Outcome:
    system: str
    durations_ms: list[float]
    total_s: float
    calls: Counter[str]
    cities: list[int]  # active city facts, per user
    active: list[int]  # active facts, per user
    load: tuple[float, float]  # 1-minute load average before and after
    note: str = ""
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def _span(values: Sequence[int]) -> str:
    lo, hi = min(values, default=0), max(values, default=0)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _p50(o: Outcome) -> float:
    return statistics.median(o.durations_ms) if o.durations_ms else float("nan")


def by_system(rounds: Sequence[Sequence[Outcome]]) -> dict[str, list[Outcome]]:
    out: dict[str, list[Outcome]] = {}
    for outcomes in rounds:
        for o in outcomes:
            out.setdefault(o.system, []).append(o)
    return out


def _ratios(runs: Sequence[Outcome], refs: Sequence[Outcome]) -> tuple[float, float]:
    """(p50, whole run) of ``runs`` over ``refs``: the median of the ratios within a round."""
    pairs = list(zip(runs, refs, strict=True))
    return (statistics.median(_p50(o) / _p50(ref) for o, ref in pairs),
            statistics.median(o.total_s / ref.total_s for o, ref in pairs))


def table(rounds: Sequence[Sequence[Outcome]], turns: int) -> str:
    """Medians over the rounds; a ratio is the median of the ratios within each round.

    Two ratios per mem0 row: against memfleet one job at a time (p50, and the whole
    run), the latency of one turn beside mem0's one ``add``; and against memfleet's
    worker at the next max_jobs measured (its default, 10), over the whole run: what
    one process of each gets through."""
    systems = by_system(rounds)
    references = [name for name in systems if name.startswith("memfleet")]
    lines = [
        "| system | time per turn p50 | total (per turn) | model calls per turn "
        "| \"city\" facts active per user | memfleet one at a time faster, p50 (total) "
        "| memfleet's worker faster, total |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for name, runs in systems.items():
        p50 = statistics.median(_p50(o) for o in runs)
        total = statistics.median(o.total_s for o in runs)
        chat = sum(o.calls.get("chat", 0) for o in runs) / turns / len(runs)
        emb = sum(o.calls.get("embeddings", 0) for o in runs) / turns / len(runs)
        latency = throughput = ""
        if references and not name.startswith("memfleet"):
            p50_ratio, total_ratio = _ratios(runs, systems[references[0]])
            latency = f"{p50_ratio:.1f}x ({total_ratio:.1f}x)"
            if len(references) > 1:
                throughput = f"{_ratios(runs, systems[references[1]])[1]:.1f}x"
        cities = [c for o in runs for c in o.cities]
        lines.append(
            f"| {name} | {p50:.1f} ms | {total:.1f} s ({total * 1000 / turns:.1f} ms)"
            f" | {chat:.3g} chat, {emb:.3g} embeddings | {_span(cities)} | {latency}"
            f" | {throughput} |")
    return "\n".join(lines)


def details(rounds: Sequence[Sequence[Outcome]]) -> str:
    out = []
    for n, outcomes in enumerate(rounds):
        out.append(f"round {n + 1}:")
        for o in outcomes:
            extra = f"; {o.note}" if o.note else ""
            failed = f"; {o.failed} turns failed" if o.failed else ""
            out.append(f"- {o.system}: p50 {_p50(o):.1f} ms, total {o.total_s:.1f} s;"
                       f" load average {o.load[0]:.2f} before, {o.load[1]:.2f} after;"
                       f" active facts per user {_span(o.active)}{failed}{extra}")
            out.extend(f"    {line}" for e in o.errors[:2]
                       for line in e.strip().splitlines()[-3:])
    return "\n".join(out)


def goals(rounds: Sequence[Sequence[Outcome]]) -> str:
    """The issue's goals beside the ratios measured in this run."""
    systems = by_system(rounds)
    memfleet = [name for name in systems if name.startswith("memfleet")]
    mem0 = [name for name in systems if not name.startswith("memfleet")]
    lines = ["| row | goal | measured | result |", "| --- | ---: | ---: | ---: |"]
    for name in mem0:
        goal = GOAL_VS_OLD if OLD_MEM0 in name else GOAL_VS_NEWEST
        measured: list[tuple[str, float]] = []
        if memfleet:
            p50_ratio, total_ratio = _ratios(systems[name], systems[memfleet[0]])
            measured += [(f"{memfleet[0]} faster than {name}, p50 per turn", p50_ratio),
                         (f"{memfleet[0]} faster than {name}, over the whole run",
                          total_ratio)]
        if len(memfleet) > 1:
            measured.append((f"{memfleet[1]} faster than {name}, over the whole run",
                             _ratios(systems[name], systems[memfleet[1]])[1]))
        lines += [f"| {label} | >= {goal:g}x | {ratio:.1f}x"
                  f" | {'PASS' if ratio >= goal else 'FAIL'} |" for label, ratio in measured]
    return "\n".join(lines)
