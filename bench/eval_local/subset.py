"""Which of the suite's scenarios a run takes, and how many runs (commits) they cost.

The subset is written as scenario files for `memfleet eval --scenarios DIR`, copied
as they are from the suite memfleet ships (worker/eval/scenarios/), so the run
reads them as it reads the suite.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worker.eval.run import plan_steps
from worker.eval.suite import NEEDS_SETTING, load_suite

SUITE = Path(__file__).resolve().parents[2] / "worker" / "eval" / "scenarios"
# The smoke: five scenarios, four of them across two sessions, so consolidation meets
# neighbours (an update, a retraction, a paraphrase) and extraction a plain introduction
# and someone else's fact.
SMOKE = ("plain-intro", "update-city", "retract-tool", "para-city", "others-sister")


class SubsetError(ValueError):
    """A scenario id or kind that the suite does not have."""


def suite_entries(suite: Path = SUITE) -> list[dict[str, Any]]:
    """Every scenario of the suite as its file has it, in the files' order."""
    entries: list[dict[str, Any]] = []
    for path in sorted(suite.glob("*.json")):
        entries += json.loads(path.read_text("utf-8"))
    return entries


def pick(entries: Sequence[dict[str, Any]], *, ids: Sequence[str] = (),
         kinds: Sequence[str] = (), per_kind: int | None = None,
         skip_per_kind: int = 0) -> list[dict[str, Any]]:
    """The scenarios named by id (in the suite's order), else those of ``kinds`` (all
    kinds when none, but those that need a setting on: the notes kind, named only when
    wanted), at most ``per_kind`` of each kind after its first
    ``skip_per_kind`` (the prompt work tuned on the first of each kind: skipping it
    leaves scenarios the prompts were never measured on)."""
    known = {e["id"] for e in entries}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise SubsetError(f"no scenario {', '.join(unknown)} in the suite")
    if ids:
        return [e for e in entries if e["id"] in ids]
    missing = [k for k in kinds if not any(e["kind"] == k for e in entries)]
    if missing:
        raise SubsetError(f"no scenario of kind {', '.join(missing)} in the suite")
    chosen, taken, seen = [], dict[str, int](), dict[str, int]()
    for entry in entries:
        kind = entry["kind"]
        if (kinds and kind not in kinds) or (not kinds and kind in NEEDS_SETTING):
            continue
        seen[kind] = seen.get(kind, 0) + 1
        if seen[kind] <= skip_per_kind:
            continue
        if per_kind is not None and taken.get(kind, 0) >= per_kind:
            continue
        taken[kind] = taken.get(kind, 0) + 1
        chosen.append(entry)
    return chosen


def write(entries: Sequence[dict[str, Any]], into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    (into / "subset.json").write_text(json.dumps(list(entries), ensure_ascii=False, indent=1),
                                      encoding="utf-8")
    return into


def runs(folder: Path | None = None) -> tuple[int, int]:
    """Scenarios and planned commits (``worker.eval.run.plan_steps``) of a folder or the suite."""
    scenarios = load_suite(folder)
    return len(scenarios), sum(len(plan_steps(s)) for s in scenarios)
