"""The autoscaling run's plot: replicas, jobs and lag over time, one panel each.

matplotlib is optional (bench.lib.plot.plot_available). Re-plot a saved timeline
(``python -m bench.autoscale --timeline FILE``) with any Python that has it:

    python -m bench.lib.autoscale_plot FILE docs/autoscale.png
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.lib.plot import plot_available


def plot_autoscale(timeline: Mapping[str, Any], path: Path) -> bool:
    """``timeline``: "rows" (dicts of one poll each), "lag_target_s",
    "jobs_per_replica", "load_end_s", "title". False without matplotlib."""
    if not plot_available():
        return False
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")  # files only, never a window
    plt: Any = importlib.import_module("matplotlib.pyplot")

    rows: Sequence[Mapping[str, float]] = timeline["rows"]
    t = [r["t"] for r in rows]
    fig, (top, mid, low) = plt.subplots(3, 1, figsize=(10, 8.5), sharex=True,
                                        gridspec_kw={"height_ratios": [1.1, 1, 1]})
    # The offered rate as a light area behind the jobs, on its own axis: it is the
    # cause, the jobs are what the trigger reads.
    rate = mid.twinx()
    mid.set_zorder(rate.get_zorder() + 1)  # the lines above the area
    mid.patch.set_visible(False)
    for ax in (top, rate, low):
        # The span hand-overs were offered in; after it the fleet drains.
        ax.axvspan(0, timeline["load_end_s"], color="0.94", zorder=0)
    for ax in (top, mid, low):
        ax.grid(alpha=0.3)

    top.step(t, [r["desired"] for r in rows], where="post", color="C0", linewidth=2,
             label="replicas set by the controller (KEDA/HPA formula)")
    top.plot(t, [r["workers"] for r in rows], color="C1", linewidth=1,
             label="workers up (heartbeat in Redis; draining ones included)")
    top.step(t, [r["draining"] for r in rows], where="post", color="0.5", linewidth=1,
             linestyle=":", label="draining (SIGTERM: finishing their running jobs)")
    top.set_ylabel("replicas")
    top.set_ylim(bottom=0)
    top.yaxis.get_major_locator().set_params(integer=True)
    top.legend(loc="upper left", fontsize=8)

    rate.fill_between(t, [r["offered_per_s"] for r in rows], step="post", color="C4",
                      alpha=0.3, linewidth=0, label="hand-overs offered /s (right axis)")
    rate.set_ylabel("hand-overs offered /s")
    rate.set_ylim(bottom=0)
    mid.plot(t, [r["jobs"] for r in rows], color="C2", linewidth=1.5,
             label="jobs (ready + in progress): the jobs trigger's metric")
    mid.plot(t, [r["ready"] for r in rows], color="C2", linestyle=":", label="ready")
    mid.step(t, [r["desired"] * timeline["jobs_per_replica"] for r in rows], where="post",
             color="C0", linewidth=1, linestyle="--",
             label="replicas x MEMFLEET_MAX_JOBS (the trigger's target)")
    mid.set_ylabel("jobs")
    mid.set_ylim(bottom=0)
    lines = mid.get_legend_handles_labels()
    more = rate.get_legend_handles_labels()
    mid.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize=8)

    low.plot(t, [r["lag_s"] for r in rows], color="C3",
             label="lag (oldest hand-over not committed)")
    low.axhline(timeline["lag_target_s"], color="red", linestyle="--", linewidth=1,
                label="lag target (the lag trigger's threshold)")
    low.set_ylabel("lag, s")
    low.set_ylim(bottom=0)
    low.set_xlabel("seconds since the load started (shaded: hand-overs offered)")
    low.legend(loc="upper left", fontsize=8)

    fig.suptitle(timeline["title"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m bench.lib.autoscale_plot TIMELINE.json OUT.png", file=sys.stderr)
        return 2
    if not plot_autoscale(json.loads(Path(args[0]).read_text()), Path(args[1])):
        print("matplotlib is not installed here", file=sys.stderr)
        return 1
    print(f"wrote {args[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
