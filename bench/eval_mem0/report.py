"""The eval comparison's report: one column per system, one row per kind; and its plot.

Every system's figures are `memfleet eval`'s JSON (worker.eval.report.report_json),
memfleet's from the command itself, mem0's from the same scorer over mem0's end state,
the baselines' from the scenarios (worker.eval.baselines). The table is
worker.eval.compare's, with the bootstrap 95% intervals; the plot draws them as
error bars.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib.plot import plot_available
from worker.eval.compare import System, comparison, kinds_of

__all__ = ["System", "comparison", "plot_systems"]


def plot_systems(systems: Sequence[System], path: Path,
                 title: str = "memfleet eval's suite: memfleet and mem0 on one stub model") -> bool:
    """Accuracy per kind, one bar per system; False without matplotlib."""
    if not plot_available() or not systems:
        return False
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    kinds = [*kinds_of(systems), "total"]
    colours = ["#2b7bba", "#9ecae1", "#d9822b", "#f2b872", "#888888", "#bbbbbb", "#444444"]
    height = 0.8 / len(systems)
    figure, axes = plt.subplots(figsize=(10.5, 0.5 * len(kinds) + 1.5))
    for n, system in enumerate(systems):
        values, low, high = [], [], []
        for kind in kinds:
            k = system.kind(kind)
            value = 100 * k["held"] / k["assertions"] if k and k["assertions"] else 0.0
            interval = (k or {}).get("interval") or (value / 100, value / 100)
            values.append(value)
            low.append(max(0.0, value - 100 * interval[0]))
            high.append(max(0.0, 100 * interval[1] - value))
        ys = [len(kinds) - 1 - i + (len(systems) / 2 - n - 0.5) * height for i in range(len(kinds))]
        axes.barh(ys, values, height=height, label=system.name, xerr=[low, high],
                  error_kw={"elinewidth": 0.6, "capsize": 1}, color=colours[n % len(colours)])
    axes.set_yticks(range(len(kinds)), kinds[::-1])
    axes.set_xlim(0, 105)
    axes.set_xlabel("end-state accuracy (gold assertions held, %; bootstrap 95% interval)")
    axes.set_title(title, fontsize=10)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return True
