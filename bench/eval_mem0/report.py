"""The eval comparison's report: one column per system, one row per kind; and its plot.

Every system's figures are `memfleet eval`'s JSON (worker.ops.eval_report.report_json),
memfleet's from the command itself, mem0's from the same scorer over mem0's end state.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.plot import plot_available


@dataclass(frozen=True, slots=True)
class System:
    name: str
    document: dict[str, Any]  # report_json's shape

    def kind(self, name: str) -> dict[str, Any] | None:
        if name == "total":
            return dict(self.document["total"])
        return next((dict(k) for k in self.document["kinds"] if k["kind"] == name), None)


def _kinds(systems: Sequence[System]) -> list[str]:
    out: list[str] = []
    for system in systems:
        out += [k["kind"] for k in system.document["kinds"] if k["kind"] not in out]
    return out


def _accuracy(k: dict[str, Any] | None) -> str:
    if k is None or not k["assertions"]:
        return "-"
    return f"{k['held']}/{k['assertions']} {100 * k['held'] / k['assertions']:.0f}%"


def comparison(systems: Sequence[System]) -> str:
    """Accuracy per kind and the totals' false memories, duplicates, chains and passes."""
    header = ["kind", *(s.name for s in systems)]
    rows = [[kind, *(_accuracy(s.kind(kind)) for s in systems)] for kind in _kinds(systems)]
    totals = [s.kind("total") or {} for s in systems]
    rows.append(["total", *(_accuracy(t) for t in totals)])
    rows.append(["false memories", *(str(t["false_memories"]) for t in totals)])
    rows.append(["duplicates", *(str(t["duplicates"]) for t in totals)])
    rows.append(["chains right", *(f"{t['chains_held']}/{t['chains']}" for t in totals)])
    rows.append(["scenarios passed", *(f"{t['passed']}/{t['scenarios']}" for t in totals)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    return "\n".join([line(header), *(line(r) for r in rows)])


def plot_systems(systems: Sequence[System], path: Path) -> bool:
    """Accuracy per kind, one bar per system; False without matplotlib."""
    if not plot_available() or not systems:
        return False
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    kinds = [*_kinds(systems), "total"]
    colours = ["#2b7bba", "#9ecae1", "#d9822b", "#f2b872", "#888888"]
    height = 0.8 / len(systems)
    figure, axes = plt.subplots(figsize=(10.5, 0.5 * len(kinds) + 1.5))
    for n, system in enumerate(systems):
        values = []
        for kind in kinds:
            k = system.kind(kind)
            values.append(100 * k["held"] / k["assertions"] if k and k["assertions"] else 0.0)
        ys = [len(kinds) - 1 - i + (len(systems) / 2 - n - 0.5) * height for i in range(len(kinds))]
        axes.barh(ys, values, height=height, label=system.name,
                  color=colours[n % len(colours)])
    axes.set_yticks(range(len(kinds)), kinds[::-1])
    axes.set_xlim(0, 105)
    axes.set_xlabel("end-state accuracy (gold assertions held, %)")
    axes.set_title("memfleet eval's suite: memfleet and mem0 on one stub model", fontsize=10)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return True
