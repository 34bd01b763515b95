"""A run's tables again, from what it wrote: ``python -m bench.eval_local.report RUN.json
[--calls CALLS.jsonl] [--plot FILE] [--model 1.5b|0.5b]``.

A whole comparison takes hours on this machine; a run stopped after some of its systems
has still written each finished system's scores (``--json``, marked ``partial``) and,
with ``--keep-calls``, or from its temporary folder, the endpoint's record of every
call. From those this prints what the run would have printed for the systems that
finished: the comparison beside the three baselines (scored again from the scenarios
the systems ran), the cost per user turn and the judged calls. Pure: files only.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.eval_local import calls as call_report
from bench.eval_local import cost, qa, subset
from bench.eval_local.gguf import MODELS
from bench.eval_mem0.report import plot_systems
from worker.eval.baselines import baseline_scores
from worker.eval.compare import System, comparison
from worker.eval.qa_score import QuestionScore
from worker.eval.report import scores_json
from worker.eval.suite import Scenario, load_suite


def scenarios_of(ids: Sequence[str]) -> list[Scenario]:
    """The suite's scenarios with these ids, loaded as a run loads them."""
    with tempfile.TemporaryDirectory(prefix="memfleet-evallocal-report-") as tmp:
        folder = subset.write(subset.pick(subset.suite_entries(), ids=ids), Path(tmp))
        return load_suite(folder)


def report(run: dict[str, object], record: list[dict[str, object]] | None,
           label: str) -> tuple[list[System], str]:
    """The systems (the run's, then the baselines) and the text of the tables."""
    documents = run["systems"]
    assert isinstance(documents, dict)
    scenarios_run = [s["id"] for s in next(iter(documents.values()))["scenarios"]]
    scenarios = scenarios_of(scenarios_run)
    baselines = baseline_scores(scenarios)
    ran = [System(n, d) for n, d in documents.items() if n not in baselines]
    ran += [System(n, scores_json(s)) for n, s in baselines.items()]
    user_turns, commits = cost.workload(scenarios)
    lines = [f"{len(scenarios)} scenarios on {label}; systems that finished: "
             + ", ".join(s.name for s in ran if s.name not in baselines), "",
             comparison(ran)]
    answers = run.get("qa")
    if isinstance(answers, dict) and answers:
        per_system = {n: [QuestionScore(**a) for a in scores] for n, scores in answers.items()}
        lines += ["", f"questions answered by {label} from each system's own read (exact "
                  "match; bootstrap 95% intervals over scenarios):",
                  qa.qa_comparison(per_system)]
    if record is not None:
        record = [e for e in record if not qa.is_question(e)]
        names = [s.name for s in ran if s.name not in baselines]
        judged = {n: call_report.judge_all(e for e in record if "embeddings" not in e
                                           and e.get("system") == n) for n in names}
        costs = [cost.cost_of(n, judged[n], record, user_turns, commits) for n in names]
        lines += ["", f"the cost per user turn on {label} (the same {user_turns} user turns, "
                  f"handed over in {commits} commits):", cost.table(costs)]
        for name in names:
            lines += ["", f"model calls of {name}, judged:", call_report.table(judged[name])]
    return ran, "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_local.report",
                                     description=__doc__)
    parser.add_argument("run", type=Path, help="a run's --json file (whole or partial)")
    parser.add_argument("--calls", type=Path, help="the run's --keep-calls file")
    parser.add_argument("--model", choices=sorted(MODELS), default="1.5b")
    parser.add_argument("--plot", type=Path, metavar="FILE")
    args = parser.parse_args(argv)
    try:
        run = json.loads(args.run.read_text("utf-8"))
        record = call_report.read_entries(args.calls) if args.calls else None
    except (OSError, ValueError) as exc:
        print(f"memfleet: eval-local report: {exc}", file=sys.stderr)
        return 2
    if not run.get("systems"):
        print(f"memfleet: eval-local report: {args.run} holds no system's scores",
              file=sys.stderr)
        return 2
    label = MODELS[args.model].label
    ran, text = report(run, record, label)
    print(text)
    if args.plot is not None and plot_systems(
            ran, args.plot, f"memfleet, mem0 and baselines on {label}, "
            f"{len(ran[0].document['scenarios'])} scenarios (bootstrap 95% intervals)"):
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
