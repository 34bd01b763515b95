"""The mem0 comparison's plot; matplotlib is optional (False without it)."""

from __future__ import annotations

import importlib
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.lib.plot import plot_available

Row = tuple[str, Sequence[float], Mapping[str, int], Sequence[int]]


def plot_comparison(rows: Sequence[Row], turns: int, path: Path) -> bool:
    """Three panels: time per turn (p50 bar, p10-p90 whisker), model calls per turn, cities."""
    if not plot_available() or not rows:
        return False
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")

    names = [r[0] for r in rows]
    ys = list(range(len(rows)))[::-1]
    fig, axes = plt.subplots(1, 3, figsize=(14, 0.7 * len(rows) + 1.8), sharey=True,
                             gridspec_kw={"width_ratios": [3, 2, 1.3]})
    colours = ["#2b7bba" if n.startswith("memfleet") else "#d9822b" for n in names]

    p50s, lows, highs = [], [], []
    for _, durations, _, _ in rows:
        qs = statistics.quantiles(durations, n=10) if len(durations) > 1 else [0.0] * 9
        p50 = statistics.median(durations) if durations else 0.0
        p50s.append(p50)
        lows.append(max(0.0, p50 - qs[0]))
        highs.append(max(0.0, qs[-1] - p50))
    ax = axes[0]
    ax.barh(ys, p50s, xerr=[lows, highs], color=colours, capsize=3)
    for y, v in zip(ys, p50s, strict=True):
        ax.text(v, y, f" {v:.0f} ms", va="bottom", fontsize=8)
    ax.set_yticks(ys, names)
    ax.set_xlabel("time per turn, ms (p50; whiskers p10-p90)")

    ax = axes[1]
    chat = [r[2].get("chat", 0) / turns for r in rows]
    emb = [r[2].get("embeddings", 0) / turns for r in rows]
    ax.barh(ys, chat, color="#555555", label="chat")
    ax.barh(ys, emb, left=chat, color="#aaaaaa", label="embeddings")
    for y, c, e in zip(ys, chat, emb, strict=True):
        ax.text(c + e, y, f" {c:.3g} + {e:.3g}", va="center", fontsize=8)
    ax.set_xlabel("model calls per turn")
    ax.legend(loc="best", fontsize=8)

    ax = axes[2]
    cities = [statistics.mean(r[3]) if r[3] else 0.0 for r in rows]
    ax.barh(ys, cities, color=colours)
    ax.axvline(1, color="black", linestyle="--", linewidth=1)
    for y, v in zip(ys, cities, strict=True):
        ax.text(v, y, f" {v:.3g}", va="center", fontsize=8)
    ax.set_xlabel('"city" facts active per user\n(1 is right)')

    fig.suptitle(f"mem0 and memfleet on one zero-latency OpenAI-compatible stub: {turns} turns "
                 "in all, the rounds pooled (10 facts a turn); this machine's times", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
