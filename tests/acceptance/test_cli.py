"""The CLI as an operator or a chat server's script runs it: real servers; the short
commands in this process, the rest as subprocesses (``memfleet``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from tests.helpers import worker_env
from worker.config import Settings
from worker.protocol.keys import SessionRef
from worker.store.migrate import default_schema_dir

# Commands that only read arguments, the environment and the servers, print and
# return: run in this process (``worker.cli.main.main``), a fresh interpreter adds only its
# start-up. Those that configure logging, telemetry or metrics, run servers or
# workers, or are run concurrently, run as the subprocess an operator starts.
IN_PROCESS = frozenset({"enqueue", "facts", "runs", "retry", "export", "import", "expire",
                        "consent"})
_ENVIRON_LOCK = threading.Lock()


def memfleet(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    if cwd is None and args and args[0] in IN_PROCESS:
        return _in_process(env, list(args))
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args], env=env, cwd=cwd,
        capture_output=True, text=True, timeout=120,
    )


def _in_process(env: dict[str, str], args: list[str]) -> subprocess.CompletedProcess[str]:
    """``memfleet <args>`` as a process would end: its exit code (argparse's SystemExit
    included), its stdout and stderr, and an uncaught exception as the interpreter's
    traceback and exit code 1. In a thread of its own, since the CLI runs its own event
    loop, with ``env`` as the whole environment while it runs."""
    from worker.cli.main import main as cli_main

    def call() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli_main(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:  # noqa: BLE001 - shown as the interpreter would show it
                traceback.print_exc()
                code = 1
        return code, out.getvalue(), err.getvalue()

    with _ENVIRON_LOCK:
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            with ThreadPoolExecutor(max_workers=1) as thread:
                code, out, err = thread.submit(call).result(timeout=120)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return subprocess.CompletedProcess(["memfleet", *args], code, out, err)


def write_messages(path: Path, messages: object) -> str:
    path.write_text(json.dumps(messages), encoding="utf-8")
    return str(path)


async def test_enqueue_worker_facts_round_trip(settings: Settings, tmp_path: Path) -> None:
    env = worker_env(settings)
    first = [{"role": "user", "content": "I live in Porto and I use Neovim."}]
    done = memfleet(env, "enqueue", "--session", "s1", "--user", "u1",
                    "--messages", write_messages(tmp_path / "a.json", first))
    assert done.returncode == 0, done.stderr
    assert memfleet(env, "worker", "--burst").returncode == 0
    second = [*first, {"role": "assistant", "content": "ok"},
              {"role": "user", "content": "I moved to Braga."}]
    memfleet(env, "enqueue", "--session", "s1", "--user", "u1",
             "--messages", write_messages(tmp_path / "b.json", second))
    assert memfleet(env, "worker", "--burst").returncode == 0

    active = json.loads(memfleet(env, "facts", "--user", "u1", "--json").stdout)
    assert sorted(f["text"] for f in active) == ["Lives in Braga", "Uses Neovim"]
    every = json.loads(memfleet(env, "facts", "--user", "u1", "--json", "--all").stdout)
    assert len(every) == 3
    required = {"id", "text", "category", "importance", "observed_at", "source_session_id",
                "superseded_at", "superseded_by"}
    assert all(required <= set(f) for f in every)
    porto = next(f for f in every if f["text"] == "Lives in Porto")
    braga = next(f for f in every if f["text"] == "Lives in Braga")
    assert porto["superseded_by"] == braga["id"] and porto["superseded_at"]
    assert json.loads(memfleet(env, "facts", "--user", "nobody", "--json").stdout) == []


async def test_bad_input_is_a_clear_error_and_a_nonzero_exit(
    settings: Settings, tmp_path: Path
) -> None:
    env = worker_env(settings)
    cases = {
        "role.json": json.dumps([{"role": "wizard", "content": "x"}]).encode(),
        "utf8.json": b'[{"role": "user", "content": "\xff\xfe"}]',
        "notjson.json": b"[{oops",
        "ctrl.json": json.dumps([{"role": "user", "content": "a\u0000b"}]).encode(),
    }
    for name, raw in cases.items():
        path = tmp_path / name
        path.write_bytes(raw)
        result = memfleet(env, "enqueue", "--session", "s", "--user", "u", "--messages", str(path))
        assert result.returncode == 2, name
        assert result.stderr.startswith("memfleet: "), name
        assert "Traceback" not in result.stderr, name
    missing = memfleet(env, "enqueue", "--session", "s", "--user", "u",
                       "--messages", str(tmp_path / "absent.json"))
    assert missing.returncode == 2


async def test_ten_replicas_migrating_at_once(settings: Settings, pg_server: object) -> None:
    admin = await asyncpg.connect(settings.database_url)
    await admin.execute("CREATE DATABASE fresh_migrate")
    await admin.close()
    url = (settings.database_url or "").rsplit("/", 1)[0] + "/fresh_migrate"
    env = {**worker_env(settings), "MEMFLEET_DATABASE_URL": url}
    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(lambda _: memfleet(env, "migrate"), range(10)))
    assert [r.returncode for r in results] == [0] * 10, [r.stderr for r in results]
    outputs = sorted(r.stdout.strip() for r in results)
    routines = sorted(p.stem for p in (default_schema_dir() / "routines").glob("*.sql"))
    migrations = sorted(p.stem for p in default_schema_dir().glob("0*.sql"))
    expected = ["0004_baseline", *migrations, *(f"routines/{name}" for name in routines)]
    assert outputs.count("applied: " + ", ".join(expected)) == 1
    assert outputs.count("schema is up to date") == 9
    conn = await asyncpg.connect(url)
    assert await conn.fetchval("SELECT count(*) FROM memfleet_migration") == 1 + len(migrations)
    assert await conn.fetchval("SELECT count(*) FROM memfleet_routine") == len(routines)
    await conn.close()


async def test_a_worker_with_another_embedding_dimension_refuses_to_boot(
    settings: Settings,
) -> None:
    env = worker_env(settings)
    env["MEMFLEET_EMBED_DIM"] = str(settings.embed_dim + 1)
    result = memfleet(env, "worker", "--burst")
    assert result.returncode == 2
    assert "MEMFLEET_EMBED_DIM" in result.stderr


def test_settings_errors_are_reported_plainly(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "MEMFLEET_LLM_PROVIDER": "openai",
           "MEMFLEET_DATABASE_URL": "postgresql://x/y", "MEMFLEET_REDIS_URL": "redis://x"}
    result = memfleet(env, "migrate", cwd=tmp_path)
    assert result.returncode == 2
    assert "MEMFLEET_LLM_BASE_URL" in result.stderr


def _readme_demo_excerpts() -> list[str]:
    """README's demo output block, in the runs of lines between its "..." lines."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```\nAda (demo-ada) talks", 1)[1].split("\n```", 1)[0]
    lines = ("Ada (demo-ada) talks" + block).splitlines()
    excerpts, current = [], []
    for line in [*lines, "..."]:
        if line == "...":
            excerpts.append("\n".join(current))
            current = []
        else:
            current.append(line)
    return [excerpt for excerpt in excerpts if excerpt]


def _undated(text: str) -> str:
    return re.sub(r"\d{4}-\d{2}-\d{2}", "YYYY-MM-DD", text)


def _demo_session(stdout: str, session: str) -> list[str]:
    """The lines the demo printed under one session's heading."""
    return stdout.split(f"\n{session}, with luna:\n", 1)[1].split("\n\n", 1)[0].splitlines()


def _demo_knows(stdout: str) -> list[str]:
    """The demo's last section, the facts' ids left out (a second run numbers anew)."""
    section = stdout.split("What memfleet knows about demo-ada now:\n", 1)[1].splitlines()
    return [line.split("] ", 1)[1] for line in section if line.startswith("  [")]


async def test_the_demo_shows_each_turn_beside_what_memfleet_did_and_runs_again_from_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    """Offline first; then, as the README suggests, again against an OpenAI-compatible
    endpoint: the second run erases what the first left and tells the same story."""
    from api_stub.llm_stub import StubServer

    first = memfleet(worker_env(settings), "demo")
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stderr == "", "the worker's per-job log lines stay out of the story"
    assert "earlier run" not in first.stdout
    assert first.stdout.count("+ added   ~ updated") == 1, "the legend, once"
    assert _demo_session(first.stdout, "demo-thursday") == [
        "  Ada: Quick update: we switched from Postgres to SQLite.",
        "  Ada: Also, I moved to Lisbon last month.",
        "  Ada: I'm flying to Tokyo on Friday. You can call me Ace, by the way.",
        "  Ada: ok thanks",
        "  memfleet: 7 new messages read, 4 facts found, committed",
        "    ~ [3] Uses Postgres -> [5] Uses SQLite",
        "    ~ [2] Lives in Berlin -> [6] Lives in Lisbon",
        f"    + [7] {_demo_knows(first.stdout)[3].split('  (')[0]}",  # the plan, dated today
        "    + [8] Wants this assistant to call them Ace  (with luna only)",
    ]
    excerpts = _readme_demo_excerpts()
    assert len(excerpts) == 2, "the README shows what the demo prints"
    assert all(_undated(excerpt) in _undated(first.stdout) for excerpt in excerpts)
    assert _demo_session(first.stdout, "demo-next-week")[-3:] == [
        "    - [5] Uses SQLite", "    + [9] Uses DuckDB", "    = 1 already known: nothing stored",
    ]

    with StubServer(dim=settings.embed_dim) as stub:
        # The three variables of the README, with the stub standing in for the endpoint.
        env = worker_env(settings, llm_provider="openai", embed_provider="openai",
                         llm_base_url=stub.v1)
        second = memfleet(env, "demo")
        recorded = stub.recorded()
    assert second.returncode == 0, second.stderr[-3000:]
    assert ("An earlier run left demo-ada's memory behind (10 facts, 4 runs): erased first,"
            in second.stdout)
    assert "~ [13] Uses Postgres -> [15] Uses SQLite" in second.stdout
    assert _demo_knows(second.stdout) == _demo_knows(first.stdout)
    assert len(_demo_knows(first.stdout)) == 7
    paths = {r["path"] for r in recorded}
    assert paths == {"/v1/chat/completions", "/v1/embeddings"}


async def test_dead_letters_are_listed_and_their_sessions_driven_again(
    settings: Settings, tmp_path: Path
) -> None:
    env = worker_env(settings)
    said = [{"role": "user", "content": "I live in Porto."}]
    memfleet(env, "enqueue", "--session", "s1", "--user", "u1",
             "--messages", write_messages(tmp_path / "a.json", said))
    # The model endpoint is down and the job has one try: it fails, on the record.
    down = {**env, "MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_EMBED_PROVIDER": "hashing",
            "MEMFLEET_LLM_BASE_URL": "http://127.0.0.1:9/v1", "MEMFLEET_LLM_MAX_ATTEMPTS": "1",
            "MEMFLEET_MAX_TRIES": "1"}
    assert memfleet(down, "worker", "--burst").returncode == 0
    (dead,) = json.loads(memfleet(env, "runs", "--json").stdout)
    assert (dead["session_id"], dead["outcome"], dead["status"]) == ("s1", "failed", "open")
    assert "ProviderUnavailable" in dead["error"]
    assert "I live in Porto" not in memfleet(env, "runs").stdout, "no user content"

    retried = memfleet(env, "retry", "--failed")
    assert (retried.returncode, retried.stdout.strip()) == (0, "u1 s1: queued")
    assert memfleet(env, "worker", "--burst").returncode == 0
    active = json.loads(memfleet(env, "facts", "--user", "u1", "--json").stdout)
    assert [f["text"] for f in active] == ["Lives in Porto"]
    nothing = memfleet(env, "retry", "--failed")
    assert (nothing.returncode, nothing.stdout) == (0, ""), "nothing failed any more"
    assert nothing.stderr == "memfleet: no open dead letter ended failed: nothing to retry\n"
    healthy = memfleet(env, "retry", "--session", "s1", "--user", "u1")
    assert healthy.returncode == 0 and healthy.stdout.startswith("u1 s1: healthy: ")
    # Its hand-over gone from Redis (a week on): a failure stays open, and says so.
    memfleet(env, "enqueue", "--session", "s2", "--user", "u1",
             "--messages", write_messages(tmp_path / "b.json", said))
    assert memfleet(down, "worker", "--burst").returncode == 0
    await _forget_handovers(settings)
    gone = memfleet(env, "retry", "--session", "s2", "--user", "u1")
    assert gone.returncode == 1 and gone.stdout.startswith("u1 s2: no hand-over in Redis")
    typo = memfleet(env, "retry", "--session", "never-handed-over", "--user", "u1")
    assert typo.returncode == 2 and typo.stderr.startswith("memfleet: no run recorded")
    alone = memfleet(env, "retry", "--session", "s1")
    assert alone.returncode == 2 and "needs --user" in alone.stderr


async def _forget_handovers(settings: Settings) -> None:
    """As a week without a hand-over leaves session s2 of u1."""
    redis = Redis.from_url(settings.redis_url or "")
    try:
        await redis.delete(SessionRef("u1", "s2").handover_key)
    finally:
        await redis.aclose()


def test_an_embedded_server_starts_only_where_its_own_url_is_unset(
    settings: Settings, tmp_path: Path
) -> None:
    env = {k: v for k, v in worker_env(settings).items() if k != "MEMFLEET_REDIS_URL"}
    env["MEMFLEET_HOME_DIR"] = str(tmp_path / "home")
    try:
        up = memfleet(env, "up")
        assert up.returncode == 0, up.stderr
        assert f"MEMFLEET_DATABASE_URL={settings.database_url}" in up.stdout
        assert (tmp_path / "home" / "redis").is_dir(), "Redis was unset: embedded"
        assert not (tmp_path / "home" / "postgres").exists(), "PostgreSQL was set: not started"
    finally:
        memfleet(env, "down")
