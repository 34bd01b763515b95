"""``python -m bench.eval_mem0``: see the package docstring."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from api_stub.llm_stub import StubServer
from bench.eval_mem0.mem0_state import Mem0Row, mem0_adds, mem0_facts
from bench.eval_mem0.report import System, comparison, plot_systems
from bench.lib.servers import Servers, throwaway_servers
from bench.mem0_compare.__main__ import create_database, mem0_venvs
from bench.mem0_compare.report import OLD_MEM0
from worker.eval.baselines import baseline_scores
from worker.eval.report import RunInfo, report_json, scores_json, table
from worker.eval.score import score_scenario
from worker.eval.suite import Scenario, load_suite
from worker.store.migrate import migrate

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "driver.py"
DEFAULT_PLOT = ROOT / "docs" / "eval_mem0.png"
RUN_TIMEOUT_S = 1800.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The one model endpoint every system is run on: the stub's, or ``--base-url``'s."""

    base_url: str
    api_key: str
    chat_model: str
    embed_model: str
    embed_dim: int

    def memfleet_env(self) -> dict[str, str]:
        return {"MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_LLM_BASE_URL": self.base_url,
                "MEMFLEET_LLM_API_KEY": self.api_key, "MEMFLEET_EXTRACT_MODEL": self.chat_model,
                "MEMFLEET_CONSOLIDATE_MODEL": self.chat_model,
                "MEMFLEET_EMBED_PROVIDER": "openai", "MEMFLEET_EMBED_MODEL": self.embed_model,
                "MEMFLEET_EMBED_DIM": str(self.embed_dim)}

    def mem0_config(self, database_url: str, home: Path) -> dict[str, Any]:
        openai = {"openai_base_url": self.base_url, "api_key": self.api_key}
        return {
            "llm": {"provider": "openai",
                    "config": {"model": self.chat_model, "temperature": 0, **openai}},
            "embedder": {"provider": "openai", "config": {
                "model": self.embed_model, "embedding_dims": self.embed_dim, **openai}},
            "vector_store": {"provider": "pgvector", "config": {
                "connection_string": database_url, "collection_name": "mem0",
                "embedding_model_dims": self.embed_dim}},
            "history_db_path": str(home / "history.db"),
        }


def _database(servers: Servers, name: str) -> str:
    return asyncio.run(create_database(servers, name))


# ---------------------------------------------------------------- memfleet


def run_memfleet(servers: Servers, endpoint: Endpoint, kinds: Sequence[str],
                 control: str | None, work: Path) -> System:
    """`memfleet eval` itself, the openai providers on the endpoint, in a database of its own."""
    name = "memfleet_add_only" if control else "memfleet"
    database_url = _database(servers, name)
    asyncio.run(migrate(database_url, embed_dim=endpoint.embed_dim))
    out = work / f"{name}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env.update({
        "MEMFLEET_DATABASE_URL": database_url, "MEMFLEET_REDIS_URL": servers.redis_url,
        "MEMFLEET_HOME_DIR": str(servers.root / "home"), **endpoint.memfleet_env()})
    args = [sys.executable, "-m", "worker.cli", "eval", "--json", str(out)]
    args += [a for k in kinds for a in ("--kind", k)]
    args += ["--control", control] if control else []
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True,  # noqa: S603
                          timeout=RUN_TIMEOUT_S, check=False)
    if done.returncode not in (0, 1) or not out.exists():
        raise RuntimeError(f"memfleet eval exited with {done.returncode}:\n{done.stderr[-2000:]}")
    print(done.stdout)
    document = json.loads(out.read_text("utf-8"))
    label = "memfleet, every decision ADD" if control else "memfleet"
    return System(label, document)


# ---------------------------------------------------------------- mem0


def _rows(database_url: str) -> dict[str, list[Mem0Row]]:
    async def read() -> list[Any]:
        conn = await asyncpg.connect(database_url)
        try:
            return list(await conn.fetch(
                "SELECT id::text AS id, payload->>'user_id' AS u, payload->>'data' AS t,"
                " payload->>'agent_id' AS a, payload->>'created_at' AS c FROM mem0"))
        finally:
            await conn.close()

    out: dict[str, list[Mem0Row]] = {}
    for r in asyncio.run(read()):
        created = datetime.fromisoformat(r["c"]) if r["c"] else None
        if created is not None and created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        out.setdefault(r["u"], []).append(Mem0Row(r["id"], r["t"] or "", r["a"], created))
    return out


def run_mem0(name: str, python: Path, scenarios: Sequence[Scenario], servers: Servers,
             endpoint: Endpoint, work: Path, *, clock: str = "real",
             timeout_s: float = RUN_TIMEOUT_S, qa: bool = False) -> System:
    """mem0 on the same stub: one ``add`` per memfleet commit, its end state scored alike.
    With ``qa``, each scenario's questions are searched at its end; the document's
    ``"searches"`` holds the hits, per scenario id, one list per question."""
    database = name.replace(".", "_").replace("-", "_")
    database_url = _database(servers, database)
    home = work / database
    home.mkdir(parents=True)
    users = {s.id: f"eval-{s.id}" for s in scenarios}
    adds = {s.id: mem0_adds(s) for s in scenarios}
    spec, result_path = home / "spec.json", home / "result.json"
    spec.write_text(json.dumps({
        "config": endpoint.mem0_config(database_url, home), "clock": clock,
        "users": [{"user_id": users[s.id],
                   "adds": [{"agent_id": a.agent_id, "messages": list(a.messages),
                             "at": a.at.isoformat()}
                            for a in adds[s.id]],
                   "questions": [{"ask": q.ask} for q in s.questions] if qa else []}
                  for s in scenarios]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEM0_"))}
    env.update({"MEM0_TELEMETRY": "False", "MEM0_DIR": str(home),
                "OPENAI_API_KEY": endpoint.api_key,
                "PYTHONDONTWRITEBYTECODE": "1"})
    with (home / "driver.log").open("w") as log:
        done = subprocess.run([str(python), str(DRIVER), str(spec), str(result_path)],  # noqa: S603
                              env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT,
                              timeout=timeout_s, check=False)
    if done.returncode != 0 or not result_path.exists():
        tail = (home / "driver.log").read_text().splitlines()[-20:]
        raise RuntimeError(f"{name}: the driver exited with {done.returncode}:\n"
                           + "\n".join(tail))
    result = json.loads(result_path.read_text())
    rows = _rows(database_url)
    scores = []
    for s in scenarios:
        facts = mem0_facts(users[s.id], adds[s.id], result["answers"][users[s.id]],
                           rows.get(users[s.id], []), s.ends_at)
        scores.append(score_scenario(s, facts))
    label = f"mem0 {result['version']}"
    info = RunInfo(extraction=f"{endpoint.chat_model} with {label}'s prompts",
                   consolidation=f"{label}'s own",
                   embeddings=f"{endpoint.embed_model} ({endpoint.embed_dim} dims)",
                   prompt_version=f"mem0 {result['version']}'s prompts")
    adds_made = sum(len(a) for a in adds.values())
    outcomes = {"added": adds_made - int(result["failed"]), "raised": int(result["failed"])}
    print(table(scores, info, outcomes))
    for error in result["errors"][:2]:
        print(f"  {label}: an add raised:\n{error}")
    print()
    document = report_json(scores, info, outcomes, 0)
    if qa:
        document["searches"] = {s.id: result.get("searches", {}).get(users[s.id], [])
                                for s in scenarios}
        if result.get("failed_searches"):
            print(f"  {label}: {result['failed_searches']} searches raised")
    return System(label, document)


# ---------------------------------------------------------------- main


@contextmanager
def _endpoint(args: argparse.Namespace) -> Iterator[Endpoint]:
    if args.base_url is None:
        with StubServer(dim=args.embed_dim) as stub:
            yield Endpoint(stub.v1, "stub", args.model, args.embed_model, args.embed_dim)
        return
    key = os.environ.get(args.api_key_env, "")
    yield Endpoint(args.base_url, key or "none", args.model, args.embed_model, args.embed_dim)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_mem0", description=__doc__)
    parser.add_argument("--mem0", nargs="*", default=[OLD_MEM0, "latest"],
                        help="mem0ai versions, 'latest' for the newest on PyPI (none: skip mem0)")
    parser.add_argument("--kind", action="append", default=[], help="some kinds only")
    parser.add_argument("--venvs", type=Path,
                        help="keep the mem0 virtualenvs here and reuse them (default: temporary)")
    parser.add_argument("--no-control", action="store_true",
                        help="skip the run of memfleet with every decision made ADD")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint for every system"
                        " (default: the project's stub, started here)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="the variable holding --base-url's key")
    parser.add_argument("--model", default="gpt-4o-mini", help="the chat model of every system")
    parser.add_argument("--embed-model", default="text-embedding-3-small")
    parser.add_argument("--embed-dim", type=int, default=1536)
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    parser.add_argument("--json", type=Path, help="also write every system's figures here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    scenarios = [s for s in load_suite() if not args.kind or s.kind in args.kind]
    if not scenarios:
        parser.error(f"no scenario of kind {', '.join(args.kind)}")
    with tempfile.TemporaryDirectory(prefix="memfleet-evalmem0-") as tmp:
        work = Path(tmp)
        venv_root = args.venvs or work / "venvs"
        venvs = mem0_venvs(args.mem0, venv_root)
        systems: list[System] = []
        with throwaway_servers(durable=False) as servers, _endpoint(args) as endpoint:
            systems.append(run_memfleet(servers, endpoint, args.kind, None, work))
            if not args.no_control:
                systems.append(run_memfleet(servers, endpoint, args.kind, "add-only", work))
            for name, python in venvs.items():
                systems.append(run_mem0(name, python, scenarios, servers, endpoint, work))
    # The baselines need no model: the same scenarios, the same scorer (docs/eval.md).
    systems += [System(name, scores_json(scores))
                for name, scores in baseline_scores(scenarios).items()]
    where = ("one OpenAI-compatible stub answering every system's prompts from the same rules"
             if args.base_url is None else f"{args.model} at {args.base_url}")
    print(f"{len(scenarios)} scenarios, {where}, one PostgreSQL;"
          f" {time.monotonic() - started:.0f} s in all (with the virtualenvs)\n")
    print(comparison(systems))
    if args.json is not None:
        args.json.write_text(json.dumps({s.name: s.document for s in systems}, indent=1))
    if plot_systems(systems, args.plot):
        print(f"\nplot: {args.plot}")
    else:
        print("\nmatplotlib is not importable: no plot")
    return 0


if __name__ == "__main__":
    sys.exit(main())
