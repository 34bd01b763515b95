"""Systems side by side: one column per system, one row per kind, with intervals.

Every system's figures are `memfleet eval`'s JSON shape (worker.eval.report:
``kinds`` and ``total``): memfleet's from a run, the baselines' from the scenario
itself (worker.eval.baselines), mem0's from bench.eval_mem0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class System:
    name: str
    document: dict[str, Any]  # report_json's shape (at least "kinds" and "total")

    def kind(self, name: str) -> dict[str, Any] | None:
        if name == "total":
            return dict(self.document["total"])
        return next((dict(k) for k in self.document["kinds"] if k["kind"] == name), None)


def kinds_of(systems: Sequence[System]) -> list[str]:
    out: list[str] = []
    for system in systems:
        out += [k["kind"] for k in system.document["kinds"] if k["kind"] not in out]
    return out


def cell(k: dict[str, Any] | None) -> str:
    """"held/assertions pct% [low-high]": the accuracy and its bootstrap 95% interval."""
    if k is None or not k["assertions"]:
        return "-"
    text = f"{k['held']}/{k['assertions']} {100 * k['held'] / k['assertions']:.0f}%"
    interval = k.get("interval")
    if interval is not None:
        text += f" [{100 * interval[0]:.0f}-{100 * interval[1]:.0f}]"
    return text


def comparison(systems: Sequence[System]) -> str:
    """Accuracy per kind and the totals' false memories, duplicates, rows that are not
    facts, chains and passes."""
    header = ["kind", *(s.name for s in systems)]
    rows = [[kind, *(cell(s.kind(kind)) for s in systems)] for kind in kinds_of(systems)]
    totals = [s.kind("total") or {} for s in systems]
    rows.append(["total", *(cell(t) for t in totals)])
    rows.append(["false memories", *(str(t["false_memories"]) for t in totals)])
    rows.append(["duplicates", *(str(t["duplicates"]) for t in totals)])
    rows.append(["not facts", *(str(t.get("malformed", "-")) for t in totals)])
    rows.append(["chains right", *(f"{t['chains_held']}/{t['chains']}" for t in totals)])
    rows.append(["scenarios passed", *(f"{t['passed']}/{t['scenarios']}" for t in totals)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    return "\n".join([line(header), *(line(r) for r in rows)])
