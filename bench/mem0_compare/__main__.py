"""``python -m bench.mem0_compare``: see the package docstring."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, EMBED_PATH, StubServer
from bench.lib.servers import Servers, throwaway_servers
from bench.lib.workload import session_plan, user_id
from bench.mem0_compare.plot import plot_comparison
from bench.mem0_compare.report import OLD_MEM0, Outcome, by_system, details, goals, table
from worker.client.handover import schedule_memory_persistence
from worker.providers.rules_patterns import parse_fact
from worker.store.migrate import migrate

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "driver.py"
DEFAULT_PLOT = ROOT / "docs" / "mem0_compare.png"
EMBED_DIM = 1536
CITY_KEY = "lives in"  # parse_fact's slot of "Lives in <city>"
QUEUE = "memfleet:queue"
RUN_TIMEOUT_S = 3600.0


@dataclass(frozen=True, slots=True)
class Turn:
    user_id: str
    session_id: str
    messages: list[dict[str, str]]


def workload_turns(seed: int, users: int, turns: int) -> list[Turn]:
    """Turn j of every user, then turn j + 1: a user's turns in order, far apart."""
    out = []
    for job in range(turns):
        for user in range(users):
            plan = session_plan(seed, user, job, job * users + user)
            out.append(Turn(user_id(user), f"mem0cmp-{user:03d}-{job:03d}", list(plan.new)))
    return out


# ---------------------------------------------------------------- servers and counts


async def create_database(servers: Servers, name: str) -> str:
    conn = await asyncpg.connect(servers.database_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return servers.database_url.rsplit("/", 1)[0] + "/" + name


def _per_user(rows: Sequence[tuple[str, str]], users: Sequence[str]) -> tuple[list[int], list[int]]:
    cities, active = Counter[str](), Counter[str]()
    for user, text in rows:
        active[user] += 1
        slot = parse_fact(text)
        if slot.kind == "single" and slot.key == CITY_KEY:
            cities[user] += 1
    return [cities[u] for u in users], [active[u] for u in users]


async def _mem0_rows(database_url: str) -> list[tuple[str, str]]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT payload->>'user_id' AS u, payload->>'data' AS t FROM mem0")
    finally:
        await conn.close()
    return [(r["u"], r["t"]) for r in rows]


def _calls(stub: StubServer) -> Counter[str]:
    seen = stub.state.recorded(clear=True)
    if len(seen) == stub.state.requests.maxlen:
        raise SystemExit("the stub's request log is full: counts would be short")
    return Counter("chat" if r["path"] == CHAT_PATH else "embeddings" if r["path"] == EMBED_PATH
                   else r["path"] for r in seen)


def _load() -> float:
    return os.getloadavg()[0]


# ---------------------------------------------------------------- mem0


def mem0_venv(where: Path, spec: str) -> Path:
    """A virtualenv with mem0ai ``spec`` and psycopg 3 (mem0's pgvector store's first choice)."""
    python = where / "bin" / "python"
    if not python.exists():
        subprocess.run([getattr(sys, "_base_executable", sys.executable),  # noqa: S603
                        "-m", "venv", str(where)], check=True)
        log = where / "pip.log"
        with log.open("w") as out:
            done = subprocess.run(  # noqa: S603 - our own virtualenv's pip
                [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
                 spec, "psycopg[binary,pool]"], stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            tail = [line for line in log.read_text().splitlines() if "WARNING" not in line]
            raise RuntimeError(f"pip install {spec} failed:\n" + "\n".join(tail[-15:]))
    return python


def mem0_venvs(versions: Sequence[str], root: Path) -> dict[str, Path]:
    """``mem0-<version>`` -> its virtualenv's python, one per version ('latest': the newest)."""
    venvs = {}
    for version in versions:
        name = f"mem0-{version}"
        print(f"{name}: virtualenv ...", file=sys.stderr, flush=True)
        venvs[name] = mem0_venv(root / name,
                                "mem0ai" if version == "latest" else f"mem0ai=={version}")
    return venvs


def mem0_config(stub: StubServer, database_url: str, home: Path) -> dict[str, Any]:
    openai = {"openai_base_url": stub.v1, "api_key": "stub"}
    return {
        "llm": {"provider": "openai",
                "config": {"model": "gpt-4o-mini", "temperature": 0, **openai}},
        "embedder": {"provider": "openai",
                     "config": {"model": "text-embedding-3-small", **openai}},
        # mem0's defaults otherwise (an HNSW index on its table).
        "vector_store": {"provider": "pgvector",
                         "config": {"connection_string": database_url, "collection_name": "mem0",
                                    "embedding_model_dims": EMBED_DIM}},
        "history_db_path": str(home / "history.db"),
    }


async def run_mem0(name: str, python: Path, turns: list[Turn], servers: Servers,
                   stub: StubServer, work: Path, round_: int) -> Outcome:
    database = f"{name}_r{round_}".replace(".", "_").replace("-", "_")
    database_url = await create_database(servers, database)
    home = work / database
    home.mkdir(parents=True)
    spec_path, result_path = home / "spec.json", home / "result.json"
    spec_path.write_text(json.dumps({
        "config": mem0_config(stub, database_url, home),
        "turns": [{"user_id": t.user_id, "messages": t.messages} for t in turns]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEM0_"))}
    env.update({"MEM0_TELEMETRY": "False", "MEM0_DIR": str(home), "OPENAI_API_KEY": "stub",
                "PYTHONDONTWRITEBYTECODE": "1"})
    _calls(stub)
    before = _load()
    with (home / "driver.log").open("w") as log:
        proc = await asyncio.create_subprocess_exec(
            str(python), str(DRIVER), str(spec_path), str(result_path),
            env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT)
        code = await asyncio.wait_for(proc.wait(), RUN_TIMEOUT_S)
    calls = _calls(stub)
    if code != 0 or not result_path.exists():
        tail = (home / "driver.log").read_text().splitlines()[-20:]
        raise RuntimeError(f"{name}: the mem0 driver exited with {code}:\n" + "\n".join(tail))
    result = json.loads(result_path.read_text())
    users = sorted({t.user_id for t in turns})
    cities, active = _per_user(await _mem0_rows(database_url), users)
    return Outcome(f"mem0 {result['version']}", result["durations_ms"],
                   sum(result["durations_ms"]) / 1000, calls, cities, active, (before, _load()),
                   failed=int(result["failed"]), errors=list(result["errors"]))


# ---------------------------------------------------------------- memfleet


def _memfleet_command() -> list[str]:
    script = Path(sys.executable).parent / "memfleet"
    return [str(script)] if script.exists() else [sys.executable, "-m", "worker.cli"]


async def run_memfleet(turns: list[Turn], servers: Servers, stub: StubServer, work: Path,
                       max_jobs: int, redis_db: int, round_: int) -> Outcome:
    name = f"memfleet_jobs{max_jobs}_r{round_}"
    database_url = await create_database(servers, name)
    await migrate(database_url, embed_dim=EMBED_DIM)
    redis_url = servers.redis_url.rsplit("/", 1)[0] + f"/{redis_db}"  # redis://host:port/0
    redis = Redis.from_url(redis_url)
    try:
        for turn in turns:
            enqueued = await schedule_memory_persistence(
                redis, turn.session_id, turn.user_id, turn.messages, queue_name=QUEUE)
            if enqueued.job_id is None:
                raise RuntimeError(f"{turn.session_id}: the hand-over joined a queued job")
    finally:
        await redis.aclose()
    home = work / name
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env.update({
        "MEMFLEET_DATABASE_URL": database_url, "MEMFLEET_REDIS_URL": redis_url,
        "MEMFLEET_HOME_DIR": str(servers.root / "home"),  # the fence key
        "MEMFLEET_QUEUE_NAME": QUEUE,
        "MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_LLM_BASE_URL": stub.v1,
        "MEMFLEET_LLM_API_KEY": "stub", "MEMFLEET_EMBED_PROVIDER": "openai",
        "MEMFLEET_EMBED_DIM": str(EMBED_DIM), "MEMFLEET_MAX_JOBS": str(max_jobs),
        "MEMFLEET_EXPIRY_INTERVAL_S": "0",
    })
    _calls(stub)
    before = _load()
    with (home / "worker.log").open("w") as log:
        proc = await asyncio.create_subprocess_exec(
            *_memfleet_command(), "worker", "--burst", "--log-level", "WARNING",
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        code = await asyncio.wait_for(proc.wait(), RUN_TIMEOUT_S)
    calls = _calls(stub)
    if code != 0:
        tail = (home / "worker.log").read_text().splitlines()[-20:]
        raise RuntimeError(f"memfleet worker exited with {code}:\n" + "\n".join(tail))
    conn = await asyncpg.connect(database_url)
    try:
        runs = await conn.fetch(
            "SELECT outcome, extract(epoch FROM finished_at - started_at) * 1000 AS ms,"
            " started_at, finished_at FROM memory_run ORDER BY id")
        facts = await conn.fetch(
            "SELECT user_id, text FROM memory_fact WHERE superseded_at IS NULL")
    finally:
        await conn.close()
    outcomes = Counter(r["outcome"] for r in runs)
    total = (max(r["finished_at"] for r in runs) - min(r["started_at"] for r in runs)) \
        .total_seconds() if runs else 0.0
    users = sorted({t.user_id for t in turns})
    cities, active = _per_user([(r["user_id"], r["text"]) for r in facts], users)
    label = "memfleet (one worker, " + ("one job at a time)" if max_jobs == 1
                                       else f"max_jobs {max_jobs})")
    note = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    return Outcome(label, [float(r["ms"]) for r in runs], total, calls, cities, active,
                   (before, _load()), note=f"memory_run: {note}",
                   failed=len(turns) - len(runs))


# ---------------------------------------------------------------- report


# ---------------------------------------------------------------- main


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    path = Path(tempfile.mkdtemp(prefix="memfleet-mem0cmp-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def _run(args: argparse.Namespace, venvs: dict[str, Path], work: Path
               ) -> list[list[Outcome]]:
    """Every system once a round, each on a fresh database; the order rotates each round."""
    turns = workload_turns(args.seed, args.users, args.turns)
    systems: list[tuple[str, Any]] = [("memfleet", jobs) for jobs in args.memfleet_max_jobs]
    systems += [(name, python) for name, python in venvs.items()]
    rounds: list[list[Outcome]] = []
    with throwaway_servers(durable=True) as servers, StubServer(dim=EMBED_DIM) as stub:
        for round_ in range(args.rounds):
            shift = round_ % max(1, len(systems))
            done: dict[int, Outcome] = {}
            for index in [*range(shift, len(systems)), *range(shift)]:
                kind, what = systems[index]
                print(f"round {round_ + 1}: {kind} {what if kind == 'memfleet' else ''}...",
                      file=sys.stderr, flush=True)
                if kind == "memfleet":  # a Redis db of its own: 1, 2, ...
                    db = 1 + round_ * len(systems) + index
                    done[index] = await run_memfleet(turns, servers, stub, work, what, db % 16,
                                                     round_)
                else:
                    done[index] = await run_mem0(kind, what, turns, servers, stub, work, round_)
            rounds.append([done[i] for i in range(len(systems))])  # the table's order
    return rounds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mem0_compare",
                                     description=__doc__)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--turns", type=int, default=20, help="turns per user")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mem0", nargs="*", default=[OLD_MEM0, "latest"],
                        help="mem0ai versions, 'latest' for the newest on PyPI (none: skip mem0)")
    parser.add_argument("--memfleet-max-jobs", type=int, nargs="*", default=[1, 10],
                        help="one memfleet run per value (none: skip memfleet)")
    parser.add_argument("--venvs", type=Path,
                        help="keep the mem0 virtualenvs here and reuse them (default: temporary)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="every system once a round, the order rotated (the machine is noisy)")
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT)
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    with _workdir(None) as work, _workdir(args.venvs) as venv_root:
        venvs = mem0_venvs(args.mem0, venv_root)
        rounds = asyncio.run(_run(args, venvs, work))
    turns = args.users * args.turns
    print(f"{args.users} users x {args.turns} turns x 10 facts per turn; one zero-latency stub,"
          f" one PostgreSQL (pgvector), {os.cpu_count()} CPUs; {time.monotonic() - started:.0f} s"
          " in all (with the virtualenvs)\n")
    print(table(rounds, turns))
    print()
    print(goals(rounds))
    print()
    print(details(rounds))
    if args.json is not None:
        args.json.write_text(json.dumps([[{
            "system": o.system, "durations_ms": o.durations_ms, "total_s": o.total_s,
            "calls": dict(o.calls), "cities": o.cities, "active": o.active, "load": o.load,
            "failed": o.failed} for o in outcomes] for outcomes in rounds], indent=1))
    pooled = [(name, [d for o in runs for d in o.durations_ms],
               sum((o.calls for o in runs), Counter[str]()), [c for o in runs for c in o.cities])
              for name, runs in by_system(rounds).items()]
    if plot_comparison(pooled, turns * len(rounds), args.plot):
        print(f"\nplot: {args.plot}")
    else:
        print("\nmatplotlib is not importable: no plot")
    return 1 if any(o.failed for outcomes in rounds for o in outcomes) else 0

if __name__ == "__main__":
    sys.exit(main())
