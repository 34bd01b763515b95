"""Runs of `make eval-local` on disjoint subsets, merged into one table: ``python -m
bench.eval_local.merge A.json B.json ... [--plot FILE] [--json FILE]``.

A whole comparison on this machine takes hours; batches of scenarios (``--scenario``,
``--per-kind``) can be run one after another, each a complete run on the same model,
and merged: every system's scenarios are put together and scored per kind again, with
the bootstrap intervals over all of them (worker.eval.report.scores_json); the
costs are summed. Pure: the runs' ``--json`` files only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.eval_local.cost import Cost
from bench.eval_local.cost import table as cost_table
from worker.eval.compare import System, comparison
from worker.eval.report import scores_json
from worker.eval.score import Check, ScenarioScore

GATED = "nothing it should hold was remembered"  # worker.eval.score's gated absent check


def scenario_scores(document: dict[str, Any]) -> list[ScenarioScore]:
    """A system's per-scenario scores, back from its JSON (scores_json's ``scenarios``)."""
    return [ScenarioScore(
        s["id"], s["kind"],
        tuple(Check(c["kind"], c["said"], c["held"], c["why"],
                    gated=c["kind"] == "absent" and not c["held"] and c["why"] == GATED)
              for c in s["checks"]),
        s["duplicates"], s.get("malformed", 0)) for s in document["scenarios"]]


def merge(runs: Sequence[dict[str, Any]]) -> tuple[list[System], list[Cost], dict[str, Any]]:
    """The systems (in the first run's order) scored over every run's scenarios, their
    costs summed, and the runs' shared facts (model, scenarios, seconds)."""
    names = list(runs[0]["systems"])
    systems = []
    for name in names:
        scores: list[ScenarioScore] = []
        for run in runs:
            if name not in run["systems"]:
                raise ValueError(f"a run has no system {name!r}")
            scores += scenario_scores(run["systems"][name])
        ids = [s.scenario for s in scores]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name}: a scenario was run twice")
        systems.append(System(name, scores_json(scores)))
    costs: dict[str, Cost] = {}
    for run in runs:
        for c in run.get("cost", []):
            total = costs.setdefault(c["system"], Cost(c["system"], 0, 0))
            total.user_turns += c["user_turns"]
            total.commits += c["commits"]
            total.calls += c["calls"]
            total.prompt_tokens += c["prompt_tokens"]
            total.cached_tokens += c["cached_tokens"]
            total.completion_tokens += c["completion_tokens"]
            total.seconds += c["seconds"]
            total.embedded += c["embedded"]
            total.by_task.update(c["by_task"])
    facts = {"models": sorted({str(r.get("model")) for r in runs}),
             "scenarios": sum(int(r.get("scenarios", 0)) for r in runs),
             "minutes": round(sum(float(r["seconds"]["total"]) for r in runs) / 60, 1)}
    return systems, list(costs.values()), facts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_local.merge")
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    try:
        runs = [json.loads(p.read_text("utf-8")) for p in args.runs]
        if any(r.get("partial") for r in runs):
            raise ValueError("a run did not finish (its JSON is partial)")
        systems, costs, facts = merge(runs)
    except (OSError, ValueError, KeyError) as exc:
        print(f"memfleet: eval-local merge: {exc}", file=sys.stderr)
        return 2
    print(f"{facts['scenarios']} scenarios on {', '.join(facts['models'])}, "
          f"{len(runs)} runs, {facts['minutes']} minutes in all\n")
    print(comparison(systems))
    print("\nthe cost per user turn:")
    print(cost_table(costs))
    if args.plot is not None:
        from bench.eval_mem0.report import plot_systems

        plot_systems(systems, args.plot, f"memfleet, mem0 and baselines on "
                     f"{', '.join(facts['models'])}, {facts['scenarios']} scenarios "
                     "(bootstrap 95% intervals)")
    if args.json is not None:
        args.json.write_text(json.dumps({**facts, "systems": {s.name: s.document
                                                               for s in systems},
                                         "cost": [c.as_json() for c in costs]}, indent=1,
                                        ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
