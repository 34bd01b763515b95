"""``python -m bench.eval_local``: see the package docstring (``make eval-local``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.eval_local import calls as call_report
from bench.eval_local import cost, qa, subset, systems
from bench.eval_local.estimate import RATES_1_5B, before_run, estimate
from bench.eval_local.gguf import MODELS, ModelRefused, ensure
from bench.eval_local.servers import EndpointError, model_endpoint
from bench.eval_mem0.report import plot_systems
from bench.lib.proc import load_1min
from bench.lib.servers import throwaway_servers
from bench.mem0_compare.__main__ import mem0_venvs
from worker.eval.baselines import baseline_scores
from worker.eval.compare import System, comparison
from worker.eval.qa_score import QuestionScore
from worker.eval.report import scores_json
from worker.eval.suite import Scenario, load_suite

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 6 * 3600.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_local", description=__doc__)
    parser.add_argument("--model", choices=sorted(MODELS), default="1.5b")
    parser.add_argument("--venv", type=Path, required=True,
                        help="the bench virtualenv (bench/eval_local/requirements.txt)")
    parser.add_argument("--cache", type=Path, required=True,
                        help="where the assembled model is kept between runs")
    parser.add_argument("--smoke", action="store_true",
                        help="the smoke subset: " + ", ".join(subset.SMOKE))
    parser.add_argument("--scenario", action="append", default=[], metavar="ID",
                        help="run this scenario of the suite (repeat for several)")
    parser.add_argument("--kind", action="append", default=[], help="some kinds only")
    parser.add_argument("--per-kind", type=int, metavar="N", help="at most N of each kind")
    parser.add_argument("--skip-per-kind", type=int, default=0, metavar="N",
                        help="leave out the first N of each kind (--skip-per-kind 1: the "
                             "scenarios the prompt work was not tuned on)")
    parser.add_argument("--threads", type=int, default=1, help="the model's CPU threads")
    parser.add_argument("--ctx", type=int, default=16384,
                        help="the model's context in tokens (mem0 2.x's extraction prompt "
                             "alone is about 8,000)")
    parser.add_argument("--json", type=Path, help="also write the scores and calls here")
    parser.add_argument("--systems", nargs="+", choices=systems.SYSTEMS,
                        default=list(systems.SYSTEMS), help="the systems to run (default all;"
                        " the three baselines are always scored)")
    parser.add_argument("--mem0-venvs", type=Path, metavar="DIR",
                        help="mem0's virtualenvs, made once (default: CACHE/mem0-venvs)")
    parser.add_argument("--mem0-clock", choices=("scenario", "real"), default="scenario",
                        help="mem0's adds at the scenario's moments (default) or the real clock")
    parser.add_argument("--plot", type=Path, metavar="FILE", help="draw the table here")
    parser.add_argument("--min-score", type=float, metavar="PERCENT",
                        help="exit 1 when memfleet holds less than PERCENT of the "
                             "assertions (the regression check, make eval-local-check)")
    parser.add_argument("--broken-extraction-prompt", action="store_true",
                        help="run memfleet with its extraction prompt broken on purpose "
                             "(bench.eval_local.broken_prompt), to see the check bite")
    parser.add_argument("--qa", action="store_true",
                        help="also ask each scenario's questions at its end, answered by the "
                             "model from each system's own read (bench/eval_local/qa.py)")
    parser.add_argument("--keep-calls", type=Path, metavar="FILE",
                        help="keep the raw record of the chat calls (requests and answers, "
                             "so the scenarios' text) for `python -m bench.eval_local.calls`")
    return parser


def _fail(message: str) -> int:
    print(f"memfleet: eval-local: {message}", file=sys.stderr)
    return 2


def _print_estimate(commits: int, user_turns: int, names: Sequence[str], model: str) -> None:
    guesses = before_run(commits, names, model)
    total = sum(seconds for _, seconds in guesses)
    print(f"estimate before the run: {user_turns} user turns in {commits} commits (adds); "
          + ", ".join(f"{name} ~{seconds / 60:.0f} min" for name, seconds in guesses)
          + f"; about {total / 60:.0f} minutes of model time in all", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.min_score is not None and not 0 <= args.min_score <= 100:
        return _fail(f"--min-score is a percentage from 0 to 100, not {args.min_score:g}")
    if (args.min_score is not None or args.broken_extraction_prompt) \
            and systems.MEMFLEET not in args.systems:
        return _fail("--min-score and --broken-extraction-prompt are about memfleet: "
                     "add it to --systems")
    spec = MODELS[args.model]
    python = args.venv / "bin" / "python"
    if not python.exists():
        return _fail(f"no bench virtualenv at {args.venv} (make eval-local builds it)")
    try:
        entries = subset.pick(subset.suite_entries(),
                              ids=args.scenario or (subset.SMOKE if args.smoke else ()),
                              kinds=args.kind, per_kind=args.per_kind,
                              skip_per_kind=args.skip_per_kind)
    except subset.SubsetError as exc:
        return _fail(str(exc))
    if not entries:
        return _fail("no scenario chosen")
    names = [n for n in systems.SYSTEMS if n in args.systems]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="memfleet-evallocal-") as tmp:
        work = Path(tmp)
        folder = subset.write(entries, work / "scenarios")
        scenarios = load_suite(folder)
        user_turns, commits = cost.workload(scenarios)
        suite_scenarios, suite_runs = subset.runs()
        print(f"{len(scenarios)} scenarios; systems {', '.join(names)}, and the baselines; "
              f"the model on {args.threads} thread(s)", flush=True)
        _print_estimate(commits, user_turns, names, args.model)
        try:
            gguf = ensure(spec, args.cache, python)
        except ModelRefused as exc:
            return _fail(str(exc))
        print(f"model: {spec.label}, {gguf} ({spec.size:,} bytes, sha256 {spec.sha256}); "
              f"ready in {time.monotonic() - started:.0f} s", flush=True)
        mem0 = [n.removeprefix("mem0-") for n in names if n != systems.MEMFLEET]
        venvs = (args.mem0_venvs or args.cache / "mem0-venvs").resolve()  # run from elsewhere
        pythons = mem0_venvs(mem0, venvs) if mem0 else {}
        ran: list[System] = []
        seconds: dict[str, float] = {}
        answers: dict[str, list[QuestionScore]] = {}
        try:
            with model_endpoint(python, gguf, work, threads=args.threads,
                                ctx=args.ctx) as endpoint, \
                    throwaway_servers(durable=False) as servers:
                for name in names:
                    url = systems.system_url(endpoint.base_url, name)
                    print(f"--- {name}: on {spec.label} at {url}; load {load_1min()}",
                          flush=True)
                    at = time.monotonic()
                    if name == systems.MEMFLEET:
                        ran.append(systems.run_memfleet(
                            endpoint.base_url, spec.label, folder, servers, work,
                            RUN_TIMEOUT_S,
                            broken_extraction_prompt=args.broken_extraction_prompt,
                            qa=args.qa))
                    else:
                        ran.append(systems.run_mem0_system(
                            name, pythons[name], endpoint.base_url, spec.label, scenarios,
                            servers, work, clock=args.mem0_clock, timeout_s=RUN_TIMEOUT_S,
                            qa=args.qa))
                    seconds[name] = time.monotonic() - at
                    print(f"--- {name}: {seconds[name]:.0f} s", flush=True)
                    if args.json is not None:  # what is done survives a later failure
                        args.json.write_text(json.dumps({
                            "partial": True, "seconds": seconds,
                            "systems": {s.name: s.document for s in ran}}) + "\n")
                if args.qa:
                    at = time.monotonic()
                    answers = _answers(ran, scenarios, endpoint.base_url, spec.label)
                    seconds[qa.QA_SYSTEM] = time.monotonic() - at
                record = call_report.read_entries(endpoint.calls)
                if args.keep_calls is not None and endpoint.calls.exists():
                    shutil.copyfile(endpoint.calls, args.keep_calls)
        except EndpointError as exc:
            return _fail(str(exc))
        except (systems.SystemFailed, subprocess.TimeoutExpired) as exc:
            return _fail(str(exc))
    # The questions' answers are the measure, not a system's cost: left out of the tables.
    record = [e for e in record if not qa.is_question(e)]
    untagged = [e for e in record if str(e.get("system") or "") not in (*names, qa.QA_SYSTEM)]
    if untagged:  # every call must be some system's: else the cost table would lie
        return _fail(f"{len(untagged)} calls reached the endpoint without a system's prefix")
    ran += [System(name, scores_json(scores))
            for name, scores in baseline_scores(scenarios).items()]
    total_s = time.monotonic() - started
    print(f"\n{len(scenarios)} scenarios on {spec.label} ({args.threads} thread(s)), "
          f"every system's prompts answered by it; {total_s / 60:.1f} minutes in all "
          f"({', '.join(f'{n} {s / 60:.1f}' for n, s in seconds.items())})\n")
    print(comparison(ran))
    if args.qa:
        print(f"\nquestions answered by {spec.label} from each system's own read (exact "
              "match; bootstrap 95% intervals over scenarios):")
        print(qa.qa_comparison(answers))
        print("\n" + qa.wrong_answers(answers))
    judged = {n: call_report.judge_all(e for e in record if "embeddings" not in e
                                       and e.get("system") == n) for n in names}
    costs = [cost.cost_of(n, judged[n], record, user_turns, commits) for n in names]
    print(f"\nthe cost per user turn on {spec.label} (the same {user_turns} user turns, "
          f"handed over in {commits} commits):")
    print(cost.table(costs))
    for name in names:
        print(f"\nmodel calls of {name}, judged (memfleet's by its own parsing and checks; "
              "another's: empty or not the JSON it asked for):")
        print(call_report.table(judged[name]))
    mine = judged.get(systems.MEMFLEET) or []
    if mine:
        guess = estimate(mine, commits, suite_runs, RATES_1_5B)
        print(f"\nestimate for memfleet on the whole suite ({suite_scenarios} scenarios):")
        for line in guess.lines(spec.label, MODELS["1.5b"].label, RATES_1_5B):
            print(f"  {line}")
    if args.plot is not None and plot_systems(
            ran, args.plot, f"memfleet, mem0 and baselines on {spec.label}, {len(scenarios)} "
            "scenarios (bootstrap 95% intervals)"):
        print(f"\nplot: {args.plot}")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "model": spec.label, "threads": args.threads, "scenarios": len(scenarios),
            "user_turns": user_turns, "commits": commits, "mem0_clock": args.mem0_clock,
            "seconds": {"total": total_s, **seconds},
            "systems": {s.name: s.document for s in ran},
            "cost": [c.as_json() for c in costs],
            "calls": {n: call_report.as_json(judged[n]) for n in names},
            "qa": {n: [dataclasses.asdict(a) for a in scores] for n, scores in answers.items()}},
            indent=1, ensure_ascii=False) + "\n")
    if args.min_score is not None:
        return _check(ran, args.min_score, args.broken_extraction_prompt)
    return 0


def _answers(ran: Sequence[System], scenarios: Sequence[Scenario], base_url: str,
             model: str) -> dict[str, list[QuestionScore]]:
    """Every system's answers: memfleet's from its run, mem0's and the baselines' asked here."""
    url = systems.system_url(base_url, qa.QA_SYSTEM)
    out: dict[str, list[QuestionScore]] = {}
    for system in ran:
        if system.name == systems.MEMFLEET:
            out[system.name] = qa.memfleet_scores(system.document)
        else:
            out[system.name] = qa.answer(
                qa.mem0_asked(scenarios, system.document.get("searches", {})), url, model)
    for name, asked in qa.baseline_asked(scenarios).items():
        out[name] = qa.answer(asked, url, model)
    return out


def _check(ran: Sequence[System], min_score: float, broken: bool) -> int:
    """0 when memfleet held at least ``min_score`` percent of the assertions, else 1."""
    total = next(s for s in ran if s.name == systems.MEMFLEET).kind("total") or {}
    held, asked = int(total.get("held", 0)), int(total.get("assertions", 0))
    score = 100 * held / asked if asked else 0.0
    prompt = "the broken extraction prompt" if broken else "its prompts"
    verdict = "passes" if score >= min_score else "FAILS"
    print(f"\nregression check: memfleet with {prompt} held {held}/{asked} ({score:.1f}%); "
          f"--min-score {min_score:g}%: {verdict}")
    return 0 if score >= min_score else 1


if __name__ == "__main__":
    sys.exit(main())
