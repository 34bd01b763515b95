"""How well memory remembers, measured: `memfleet eval` (docs/eval.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from worker.cli.common import Commands, resolve
from worker.config import Settings
from worker.errors import MemfleetError

if TYPE_CHECKING:
    from worker.eval.suite import Scenario

# worker.eval.suite.KINDS' names (a test holds them equal): building the parser
# imports nothing of worker.eval.
KINDS = ("plain", "updates", "retractions", "aba", "contradictions", "relative_dates",
         "expiring", "paraphrase", "other_people", "hypotheticals", "short_replies",
         "two_agents", "non_english", "injection", "named_people", "person_changes",
         "portrait_update", "notes")
CONTROLS = ("add-only", "empty-read")
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def register(commands: Commands) -> None:
    parser = commands.add_parser(
        "eval", help="run the memory scenarios through the real pipeline on the configured "
                     "models and score the memory they leave (docs/eval.md)")
    parser.add_argument("--kind", action="append", choices=KINDS, metavar="KIND",
                        help="run only this kind of scenario (repeat for several): "
                             + ", ".join(KINDS))
    parser.add_argument("--scenarios", type=Path, metavar="DIR",
                        help="a folder of scenario files (*.json) to run instead of the "
                             "suite memfleet ships")
    parser.add_argument("--longmemeval", type=Path, metavar="FILE",
                        help="run LongMemEval's knowledge-update and temporal-reasoning "
                             "items from this file (longmemeval_s.json, _m or _oracle, "
                             "which you supply) instead of the suite")
    parser.add_argument("--longmemeval-limit", type=int, default=20, metavar="N",
                        help="take at most N LongMemEval items (default 20)")
    parser.add_argument("--longmemeval-others", type=int, default=2, metavar="K",
                        help="keep an item's answer sessions and up to K of its other "
                             "sessions (default 2)")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="also write the scores, per kind and per assertion, as JSON")
    parser.add_argument("--plot", type=Path, metavar="FILE",
                        help="also draw the accuracy per kind (.png, .svg or .pdf; needs "
                             "matplotlib)")
    parser.add_argument("--min-score", type=float, metavar="X",
                        help="exit 1 when the total accuracy (assertions held) is below X, "
                             "a fraction from 0 to 1")
    parser.add_argument("--control", choices=CONTROLS,
                        help="add-only: turn every consolidation decision into ADD, to see "
                             "what a memory that never supersedes scores; empty-read (with "
                             "--qa): answer from an empty known-facts block, to see what the "
                             "answer model gets right without memory")
    parser.add_argument("--qa", action="store_true",
                        help="also ask each scenario's questions at its end: the answer model "
                             "(MEMFLEET_EVAL_ANSWER_MODEL) answers from the known-facts block "
                             "a chat server would read; scored by exact match, and by "
                             "MEMFLEET_EVAL_JUDGE_MODEL when set")
    parser.add_argument("--retrieval", action="store_true",
                        help="also rank the facts for each question with the search a chat "
                             "server uses, and count the gold fact in the top 1 and top 3")
    parser.add_argument("--rerank", action="store_true",
                        help="with --retrieval: also count the gold fact in the same hits "
                             "re-ranked as the prompt split's volatile block ranks them "
                             "(pins, the agent's relationship facts, recency; "
                             "MEMFLEET_READ_RERANK_*), beside the plain ranking")
    parser.set_defaults(handler=cmd_eval)


def _check(args: argparse.Namespace) -> None:
    """Mistakes found before a run that may take long with a real model."""
    if args.min_score is not None and not 0 <= args.min_score <= 1:
        raise MemfleetError(f"eval: --min-score is a fraction from 0 to 1, got {args.min_score}")
    if args.control == "empty-read" and not args.qa:
        raise MemfleetError("eval: --control empty-read needs --qa")
    if args.rerank and not args.retrieval:
        raise MemfleetError("eval: --rerank needs --retrieval")
    if args.longmemeval is not None:
        for flag, given in (("--scenarios", args.scenarios), ("--kind", args.kind)):
            if given:
                raise MemfleetError(f"eval: {flag} does not go with --longmemeval")
        if not args.longmemeval.is_file():
            raise MemfleetError(f"eval: --longmemeval {args.longmemeval}: no such file")
    for flag, number in (("--longmemeval-limit", args.longmemeval_limit),
                         ("--longmemeval-others", args.longmemeval_others)):
        if number < 0 or (number == 0 and flag == "--longmemeval-limit"):
            raise MemfleetError(f"eval: {flag} must be at least "
                                f"{1 if flag == '--longmemeval-limit' else 0}, got {number}")
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None and not path.parent.resolve().is_dir():
            raise MemfleetError(f"eval: {flag} {path}: no folder {path.parent}")
    if args.plot is not None:
        if args.plot.suffix.lower() not in PLOT_SUFFIXES:
            raise MemfleetError(f"eval: --plot {args.plot}: the file must end in "
                                + ", ".join(PLOT_SUFFIXES))
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise MemfleetError("eval: --plot needs matplotlib: pip install matplotlib") \
                from None


def _runnable(settings: Settings, kinds: Sequence[str],
              scenarios: list[Scenario]) -> tuple[list[Scenario], list[str]]:
    """The scenarios the settings can run, and a line per kind left out: a kind that needs
    a setting off (the notes kind without MEMFLEET_NOTES_ENABLED) is left out of a run,
    and naming it with --kind is a mistake."""
    from worker.eval.suite import NEEDS_SETTING

    lines = []
    for kind, setting in NEEDS_SETTING.items():
        if getattr(settings, setting):
            continue
        variable = f"MEMFLEET_{setting.upper()}"
        if kind in kinds:
            raise MemfleetError(f"eval: --kind {kind} needs {variable}=true")
        skipped = sum(1 for s in scenarios if s.kind == kind)
        scenarios = [s for s in scenarios if s.kind != kind]
        if skipped:
            lines.append(f"{skipped} {kind} scenarios left out: {variable} is off")
    return scenarios, lines


def rerank_line(settings: Settings) -> str:
    """The re-ranking's weights (MEMFLEET_READ_RERANK_*), as the report names them."""
    return (f"pin +{settings.read_rerank_pin_boost:g}, agent +"
            f"{settings.read_rerank_agent_boost:g}, recency -"
            f"{settings.read_rerank_recency_penalty:g} over "
            f"{settings.read_rerank_recency_days:g} days")


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    from worker.eval.baselines import baseline_scores
    from worker.eval.compare import System, comparison
    from worker.eval.qa import QaChoice, qa_names
    from worker.eval.qa_report import QaInfo, qa_json, qa_table
    from worker.eval.report import RunInfo, plot, report_json, scores_json, table
    from worker.eval.run import run_suite
    from worker.eval.score import by_kind
    from worker.eval.suite import load_suite
    from worker.ops.preflight import check_servers
    from worker.providers.factory import embedding_model
    from worker.telemetry import configure_logging

    _check(args)
    counts = None
    if args.longmemeval is not None:
        from worker.eval.longmemeval import load_longmemeval

        loaded = load_longmemeval(args.longmemeval, limit=args.longmemeval_limit,
                                  others=args.longmemeval_others)
        if not loaded.scenarios:
            raise MemfleetError(f"eval: {loaded.line()}: nothing to run")
        scenarios, counts = loaded.scenarios, loaded
    else:
        scenarios = load_suite(args.scenarios)
    scenarios, left_out = _runnable(settings, args.kind or (), scenarios)
    if not scenarios:
        raise MemfleetError("eval: nothing to run: " + "; ".join(left_out))
    if args.kind:
        scenarios = [s for s in scenarios if s.kind in args.kind]
        if not scenarios:
            raise MemfleetError(f"eval: no scenario of kind {', '.join(args.kind)}")
    choice = QaChoice(answer=args.qa, retrieval=args.retrieval, rerank=args.rerank,
                      empty_read=args.control == "empty-read")
    qa_info = None
    if choice.any:
        if not any(s.questions for s in scenarios):
            raise MemfleetError("eval: --qa and --retrieval need questions: no scenario "
                                "chosen has any")
        answer_name, judge_name = qa_names(settings)
        qa_info = QaInfo(answered=choice.answer, retrieval=choice.retrieval,
                         answer_model=answer_name, judge_model=judge_name,
                         read_top_k=settings.read_top_k,
                         embeddings=f"{embedding_model(settings)} ({settings.embed_dim} dims)",
                         control="empty-read" if choice.empty_read else None,
                         rerank=rerank_line(settings) if choice.rerank else None)
    settings = resolve(settings)
    # Unreachable servers or a database not migrated: one line now, not a traceback later.
    asyncio.run(check_servers(settings))
    # The worker's per-job lines would bury the table; warnings still reach stderr.
    configure_logging("WARNING", http_requests=settings.log_http_requests)

    def progress(line: str) -> None:
        print(f"memfleet eval: {line}", file=sys.stderr, flush=True)

    progress(f"{len(scenarios)} scenarios")
    for line in left_out:
        progress(line)
    run = asyncio.run(run_suite(settings, scenarios, add_only=args.control == "add-only",
                                progress=progress, questions=choice))
    info = RunInfo.of(settings, "add-only" if args.control == "add-only" else None)
    if counts is not None:
        print(counts.line())
    print(table(run.scores, info, run.outcomes, shift_years=run.shift_years))
    document = report_json(run.scores, info, run.outcomes, run.shift_years)
    # The baselines need no model: made from the scenarios, scored alike (docs/eval.md).
    baselines = {name: scores_json(scores)
                 for name, scores in baseline_scores(scenarios).items()}
    document["baselines"] = baselines
    label = "memfleet" + (", add-only" if info.control else "")
    print()
    print("beside the baselines (accuracy, bootstrap 95% interval):")
    print(comparison([System(label, document),
                      *(System(name, b) for name, b in baselines.items())]))
    if qa_info is not None:
        print()
        print(qa_table(run.answers, qa_info))
        document["qa"] = qa_json(run.answers, qa_info)
    if counts is not None:
        document["longmemeval"] = counts.as_json()
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
        except OSError as exc:
            raise MemfleetError(f"eval: --json {args.json}: {exc.strerror}") from None
    if args.plot is not None:
        plot(run.scores, info, args.plot)
    accuracy = by_kind(run.scores)[1].accuracy
    if args.min_score is not None and accuracy < args.min_score:
        print(f"memfleet eval: total accuracy {accuracy:.4f} is below --min-score "
              f"{args.min_score}", file=sys.stderr)
        return 1
    return 0
