"""Percentiles and markdown tables; no dependencies beyond the standard library."""

from __future__ import annotations

import math
from collections.abc import Sequence


def pct(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile: a value that was actually observed."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def dist_cells(values: Sequence[float]) -> list[str]:
    """p50, p95, p99, mean and n, formatted as table cells."""
    return [ms(pct(values, 50)), ms(pct(values, 95)), ms(pct(values, 99)), ms(mean(values)),
            str(len(values))]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table whose columns are padded so it also reads well as plain text."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(
        "-" * (w + 1) + ":" if i else ":" + "-" * (w + 1) for i, w in enumerate(widths)
    ) + "|"
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])
