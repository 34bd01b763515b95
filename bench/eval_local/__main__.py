"""``python -m bench.eval_local``: see the package docstring (``make eval-local``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.eval_local import calls as call_report
from bench.eval_local import subset
from bench.eval_local.estimate import RATES_1_5B, estimate
from bench.eval_local.gguf import MODELS, ModelRefused, ensure
from bench.eval_local.servers import EndpointError, model_endpoint
from bench.mem0_compare.__main__ import create_database
from bench.proc import load_1min
from bench.servers import throwaway_servers
from worker.providers.local_embed import MODEL as EMBED_MODEL
from worker.providers.local_embed import WIDTH as EMBED_DIM
from worker.store.migrate import migrate

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 6 * 3600.0
NEIGHBORS_MIN_SIMILARITY = "0.4"


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
    parser.add_argument("--threads", type=int, default=1, help="the model's CPU threads")
    parser.add_argument("--json", type=Path, help="also write the scores and calls here")
    parser.add_argument("--keep-calls", type=Path, metavar="FILE",
                        help="keep the raw record of the chat calls (requests and answers, "
                             "so the scenarios' text) for `python -m bench.eval_local.calls`")
    return parser


def _fail(message: str) -> int:
    print(f"memfleet: eval-local: {message}", file=sys.stderr)
    return 2


def _memfleet_env(base_url: str, model: str, database_url: str, redis_url: str,
                  home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env.update({
        "MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_LLM_BASE_URL": base_url,
        "MEMFLEET_LLM_API_KEY": "none", "MEMFLEET_EXTRACT_MODEL": model,
        "MEMFLEET_CONSOLIDATE_MODEL": model,
        "MEMFLEET_EMBED_PROVIDER": "openai", "MEMFLEET_EMBED_MODEL": EMBED_MODEL,
        "MEMFLEET_EMBED_DIM": str(EMBED_DIM),
        # all-MiniLM-L6-v2's scale: unrelated facts of one user sit at 0.2-0.35, a
        # changed value of the same thing at 0.45 and up (docs/eval.md, prompt work).
        "MEMFLEET_NEIGHBORS_MIN_SIMILARITY": NEIGHBORS_MIN_SIMILARITY,
        # One slot on a CPU: calls wait their turn, and a long extraction is no outage.
        "MEMFLEET_MAX_JOBS": "1", "MEMFLEET_LLM_TIMEOUT_S": "1800",
        "MEMFLEET_JOB_TIMEOUT_S": "7200", "MEMFLEET_EMBED_TIMEOUT_S": "300",
        "MEMFLEET_DATABASE_URL": database_url, "MEMFLEET_REDIS_URL": redis_url,
        "MEMFLEET_HOME_DIR": str(home)})
    return env


def _warnings(stderr: str) -> str:
    """The worker's warning events, counted by name (its JSON log lines quote no content)."""
    events: Counter[str] = Counter()
    for line in stderr.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") in ("warning", "error"):
            events[f"{entry.get('event')} ({entry['level']})"] += 1
    return ", ".join(f"{name}: {n}" for name, n in events.most_common()) or "none"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    spec = MODELS[args.model]
    python = args.venv / "bin" / "python"
    if not python.exists():
        return _fail(f"no bench virtualenv at {args.venv} (make eval-local builds it)")
    try:
        entries = subset.pick(subset.suite_entries(),
                              ids=args.scenario or (subset.SMOKE if args.smoke else ()),
                              kinds=args.kind, per_kind=args.per_kind)
    except subset.SubsetError as exc:
        return _fail(str(exc))
    if not entries:
        return _fail("no scenario chosen")
    started = time.monotonic()
    try:
        gguf = ensure(spec, args.cache, python)
    except ModelRefused as exc:
        return _fail(str(exc))
    model_s = time.monotonic() - started
    print(f"model: {spec.label}, {gguf} ({spec.size:,} bytes, sha256 {spec.sha256}); "
          f"ready in {model_s:.0f} s", flush=True)
    with tempfile.TemporaryDirectory(prefix="memfleet-evallocal-") as tmp:
        work = Path(tmp)
        folder = subset.write(entries, work / "scenarios")
        scenarios, runs_planned = subset.runs(folder)
        suite_scenarios, suite_runs = subset.runs()
        out = work / "memfleet.json"
        try:
            with model_endpoint(python, gguf, work, threads=args.threads) as endpoint, \
                    throwaway_servers(durable=False) as servers:
                database_url = asyncio.run(create_database(servers, "memfleet"))
                asyncio.run(migrate(database_url, embed_dim=EMBED_DIM))
                env = _memfleet_env(endpoint.base_url, spec.label, database_url,
                                    servers.redis_url, servers.root / "home")
                print(f"memfleet eval: {scenarios} scenarios, {runs_planned} runs planned, "
                      f"the model on {args.threads} thread(s); load {load_1min()}", flush=True)
                eval_started = time.monotonic()
                done = subprocess.run(  # noqa: S603
                    [sys.executable, "-m", "worker.cli", "eval", "--scenarios", str(folder),
                     "--json", str(out)], env=env, cwd=ROOT, capture_output=True, text=True,
                    timeout=RUN_TIMEOUT_S, check=False)
                eval_s = time.monotonic() - eval_started
                calls = call_report.read_calls(endpoint.calls)
                if args.keep_calls is not None and endpoint.calls.exists():
                    shutil.copyfile(endpoint.calls, args.keep_calls)
        except EndpointError as exc:
            return _fail(str(exc))
        if done.returncode not in (0, 1) or not out.exists():
            print(done.stderr[-3000:], file=sys.stderr)
            return _fail(f"memfleet eval exited with {done.returncode}")
        document = json.loads(out.read_text("utf-8"))
    print(done.stdout)
    print(f"memfleet eval took {eval_s:.0f} s; load {load_1min()}")
    print(f"its warnings: {_warnings(done.stderr)}\n")
    print(f"model calls, judged by memfleet's own parsing and checks ({spec.label}):")
    print(call_report.table(calls))
    if calls:
        guess = estimate(calls, runs_planned, suite_runs, RATES_1_5B)
        print(f"\nestimate for the whole suite ({suite_scenarios} scenarios):")
        for line in guess.lines(spec.label, MODELS["1.5b"].label, RATES_1_5B):
            print(f"  {line}")
    if args.json is not None:
        document["calls"] = call_report.as_json(calls)
        document["seconds"] = {"model_ready": model_s, "eval": eval_s}
        args.json.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
