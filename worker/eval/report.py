"""`memfleet eval`'s report: the table on stdout, the JSON for CI, the plot.

Pure but for the plot's file: scores (worker.eval.score) and what was run in,
text and dicts out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.errors import MemfleetError
from worker.eval.score import KindScore, ScenarioScore, by_kind
from worker.providers.factory import embedding_model
from worker.providers.prompts import PROMPT_VERSION
from worker.providers.rules import MODEL as RULES_MODEL


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a table's figures were measured with."""

    extraction: str
    consolidation: str
    embeddings: str
    prompt_version: str
    control: str | None = None  # "add-only": consolidation turned into ADD (worker.eval.run)

    @classmethod
    def of(cls, settings: Settings, control: str | None = None) -> RunInfo:
        rules = settings.llm_provider == "rules"
        return cls(
            extraction=RULES_MODEL if rules else settings.extract_model,
            consolidation=RULES_MODEL if rules else settings.consolidate_model,
            embeddings=f"{embedding_model(settings)} ({settings.embed_dim} dims)",
            prompt_version=PROMPT_VERSION,
            control=control,
        )

    def line(self) -> str:
        control = f"; control: {self.control}" if self.control else ""
        return (f"extraction {self.extraction}, consolidation {self.consolidation}, "
                f"embeddings {self.embeddings}, prompt {self.prompt_version}{control}")


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _ratio(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "-"


HEADER = ("kind", "scenarios", "passed", "assertions", "accuracy", "95% interval",
          "false mem.", "duplicates", "not facts", "chains")


def _interval(k: KindScore) -> str:
    if k.interval is None:
        return "-"
    return f"{100 * k.interval[0]:.1f}-{100 * k.interval[1]:.1f}%"


def _row(k: KindScore) -> tuple[str, ...]:
    return (k.kind, str(k.scenarios), _ratio(k.passed, k.scenarios),
            _ratio(k.held, k.assertions), _percent(k.held, k.assertions), _interval(k),
            str(k.false_memories), str(k.duplicates), str(k.malformed),
            _ratio(k.chains_held, k.chains))


def table(scores: Sequence[ScenarioScore], info: RunInfo, outcomes: dict[str, int],
          *, shift_years: int = 0, details: bool = True) -> str:
    """The table per kind and the totals; ``details``: every assertion that did not hold
    (its dates on the moved scenario clock, ``shift_years`` ahead: worker.eval.suite)."""
    kinds, total = by_kind(scores)
    rows = [HEADER, *(_row(k) for k in kinds), _row(total)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    runs = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())) or "none"
    clock = f"; scenario clock {shift_years} years ahead" if shift_years else ""
    out = [f"memfleet eval: {len(scores)} scenarios; {info.line()}", f"runs: {runs}{clock}", "",
           line(rows[0]), *(line(r) for r in rows[1:-1]), line(rows[-1])]
    if details and total.failed:
        out += ["", "did not hold:"]
        out += [f"  {scenario}: {check.said}: {check.why}" for scenario, check in total.failed]
    return "\n".join(out)


def _kind_json(k: KindScore) -> dict[str, Any]:
    interval = None if k.interval is None else [round(v, 4) for v in k.interval]
    return {"kind": k.kind, "scenarios": k.scenarios, "passed": k.passed,
            "assertions": k.assertions, "held": k.held, "accuracy": round(k.accuracy, 4),
            "interval": interval, "false_memories": k.false_memories,
            "duplicates": k.duplicates, "malformed": k.malformed,
            "chains": k.chains, "chains_held": k.chains_held}


def scores_json(scores: Sequence[ScenarioScore]) -> dict[str, Any]:
    """The figures per kind and in total, and every check of every scenario."""
    kinds, total = by_kind(scores)
    return {
        "kinds": [_kind_json(k) for k in kinds],
        "total": _kind_json(total),
        "scenarios": [{"id": s.scenario, "kind": s.kind, "passed": s.passed,
                       "duplicates": s.duplicates, "malformed": s.malformed,
                       "checks": [{"kind": c.kind, "said": c.said, "held": c.held,
                                   "why": c.why} for c in s.checks]} for s in scores],
    }


def report_json(scores: Sequence[ScenarioScore], info: RunInfo, outcomes: dict[str, int],
                shift_years: int) -> dict[str, Any]:
    return {
        "models": {"extraction": info.extraction, "consolidation": info.consolidation,
                   "embeddings": info.embeddings},
        "prompt_version": info.prompt_version,
        "control": info.control,
        "clock_shift_years": shift_years,
        "runs": dict(sorted(outcomes.items())),
        **scores_json(scores),
    }


def plot(scores: Sequence[ScenarioScore], info: RunInfo, path: Path) -> None:
    """Accuracy per kind as bars, into ``path`` (PNG, SVG or PDF by its suffix)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MemfleetError("--plot needs matplotlib: pip install matplotlib") from None
    kinds, total = by_kind(scores)
    rows = [*kinds, total]
    names = [k.kind for k in rows]
    values = [100 * k.accuracy for k in rows]
    # The bootstrap 95% interval as an error bar around each bar.
    spans = [k.interval or (k.accuracy, k.accuracy) for k in rows]
    errors = [[max(0.0, v - 100 * low) for v, (low, _) in zip(values, spans, strict=True)],
              [max(0.0, 100 * high - v) for v, (_, high) in zip(values, spans, strict=True)]]
    figure, axes = plt.subplots(figsize=(8, 0.35 * len(names) + 1.6))
    bars = axes.barh(names[::-1], values[::-1], xerr=[e[::-1] for e in errors],
                     error_kw={"elinewidth": 1, "capsize": 2},
                     color=["#555555"] + ["#4c72b0"] * len(kinds))
    axes.bar_label(bars, fmt="%.0f%%", padding=3, fontsize=8)
    axes.set_xlim(0, 110)
    axes.set_xlabel("end-state accuracy (assertions held, %; bars: bootstrap 95% interval)")
    axes.set_title(f"memfleet eval: {info.extraction} / {info.consolidation}"
                   + (f" ({info.control})" if info.control else ""), fontsize=10)
    figure.tight_layout()
    try:
        figure.savefig(path)
    except (OSError, ValueError) as exc:
        raise MemfleetError(f"--plot {path}: {exc}") from None
    finally:
        plt.close(figure)
