"""The latency plot. matplotlib is optional: without it the bench says so and skips the plot.

Re-plot from a saved sample file (``python -m bench.run --samples FILE``) with
any Python that has matplotlib:

    python -m bench.lib.plot FILE docs/bench/latency.png
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def plot_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def plot_latency(
    panels: Mapping[str, Mapping[str, Sequence[float]]], path: Path, title: str,
    marks: Mapping[str, float] | None = None,
) -> bool:
    """One horizontal box plot per panel (whiskers p1-p99, log scale); False without matplotlib.

    ``marks`` draws a dashed line at a value (ms) on the panel of that name.
    """
    if not plot_available():
        return False
    # Imported by name: matplotlib is optional and not a declared dependency.
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")  # files only, never a window
    plt: Any = importlib.import_module("matplotlib.pyplot")

    heights = [max(2.0, 0.42 * len(series) + 1.0) for series in panels.values()]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (name, series) in zip(axes[:, 0], panels.items(), strict=True):
        labels = list(series)[::-1]  # first series on top
        data = [[max(v, 1e-3) for v in series[label]] for label in labels]
        try:  # matplotlib >= 3.10 spells it orientation; vert= is deprecated there
            ax.boxplot(data, orientation="horizontal", whis=(1, 99), showfliers=False,
                       widths=0.6)
        except TypeError:
            ax.boxplot(data, vert=False, whis=(1, 99), showfliers=False, widths=0.6)
        ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("ms (log scale; box p25-p75, line p50, whiskers p1-p99)", fontsize=8)
        ax.set_title(name, fontsize=10, loc="left")
        if marks and name in marks:
            ax.axvline(marks[name], color="red", linestyle="--", linewidth=1)
        ax.grid(axis="x", which="both", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m bench.lib.plot SAMPLES.json OUT.png", file=sys.stderr)
        return 2
    saved = json.loads(Path(args[0]).read_text())
    if not plot_latency(saved["panels"], Path(args[1]), saved["title"], saved.get("marks")):
        print("matplotlib is not installed here", file=sys.stderr)
        return 1
    print(f"wrote {args[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
