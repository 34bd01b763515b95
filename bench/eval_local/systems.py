"""Each system of the local comparison, run against the one model endpoint.

Every system gets a base URL of its own on the endpoint (``/sys/NAME/v1``, serve.py),
so its calls are recorded under its name; all reach the same llama.cpp and the same
MiniLM embedder. memfleet is `memfleet eval` itself (its openai providers); mem0 is
bench.eval_mem0's adapter (``Memory.from_config`` with the openai LLM and embedder on
that base URL, pgvector on the same PostgreSQL), one ``Memory.add`` per memfleet commit.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.eval_mem0.__main__ import Endpoint as Mem0Endpoint
from bench.eval_mem0.__main__ import run_mem0
from bench.lib.servers import Servers
from bench.mem0_compare.__main__ import create_database
from worker.eval.compare import System
from worker.eval.suite import Scenario
from worker.providers.local_embed import MODEL as EMBED_MODEL
from worker.providers.local_embed import WIDTH as EMBED_DIM
from worker.store.migrate import migrate

ROOT = Path(__file__).resolve().parents[2]
MEMFLEET = "memfleet"
MEM0_VERSIONS = ("1.0.9", "2.2.1")
SYSTEMS = (MEMFLEET, *(f"mem0-{v}" for v in MEM0_VERSIONS))
NEIGHBORS_MIN_SIMILARITY = "0.4"
CLI, CLI_BROKEN = "worker.cli", "bench.eval_local.broken_prompt"


def system_url(base_url: str, system: str) -> str:
    """The endpoint's ``.../v1`` as ``system`` is given it: ``.../sys/SYSTEM/v1``."""
    return f"{base_url.removesuffix('/v1')}/sys/{system}/v1"


# The parts of issue 42 a run may switch (docs/persons.md, notes.md, portrait.md): passed
# through from this process's environment; every other MEMFLEET_ variable is the bench's.
PART_SWITCHES = ("MEMFLEET_PERSONS", "MEMFLEET_NOTES_ENABLED", "MEMFLEET_PORTRAIT_ENABLED")


def memfleet_env(base_url: str, model: str, database_url: str, redis_url: str,
                 home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMFLEET_") or k in PART_SWITCHES}
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


def warnings(stderr: str) -> str:
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


class SystemFailed(RuntimeError):
    """A system's run ended without figures."""


def run_memfleet(base_url: str, model: str, folder: Path, servers: Servers, work: Path,
                 timeout_s: float, *, broken_extraction_prompt: bool = False,
                 qa: bool = False) -> System:
    """`memfleet eval` on ``folder`` (with ``qa``, `--qa`: the model answers each
    question from memfleet's read); with ``broken_extraction_prompt`` through
    bench.eval_local.broken_prompt, the CLI with its extraction prompt broken."""
    database_url = asyncio.run(create_database(servers, "memfleet"))
    asyncio.run(migrate(database_url, embed_dim=EMBED_DIM))
    out = work / "memfleet.json"
    env = memfleet_env(system_url(base_url, MEMFLEET), model, database_url,
                       servers.redis_url, servers.root / "home")
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-m", CLI_BROKEN if broken_extraction_prompt else CLI, "eval",
         "--scenarios", str(folder), "--json", str(out), *(["--qa"] if qa else [])],
        env=env, cwd=ROOT,
        capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode not in (0, 1) or not out.exists():
        raise SystemFailed(f"memfleet eval exited with {done.returncode}:\n"
                           f"{done.stderr[-3000:]}")
    print(done.stdout)
    print(f"memfleet's warnings: {warnings(done.stderr)}", flush=True)
    return System(MEMFLEET, json.loads(out.read_text("utf-8")))


def run_mem0_system(name: str, python: Path, base_url: str, model: str,
                    scenarios: Sequence[Scenario], servers: Servers, work: Path, *,
                    clock: str, timeout_s: float, qa: bool = False) -> System:
    endpoint = Mem0Endpoint(system_url(base_url, name), "none", model, EMBED_MODEL, EMBED_DIM)
    try:
        return run_mem0(name, python, scenarios, servers, endpoint, work, clock=clock,
                        timeout_s=timeout_s, qa=qa)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        raise SystemFailed(str(exc)) from exc
