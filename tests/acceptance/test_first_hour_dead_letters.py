"""Dead letters as a newcomer meets them in the first hour: every answer of `memfleet
runs` and `memfleet retry` is one line with the right exit code, nothing is silent,
and a worker's shutdown line counts the jobs that failed. Subprocesses, real servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import worker_env
from worker.config import Settings

MODEL_DOWN = {"MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_EMBED_PROVIDER": "hashing",
              "MEMFLEET_LLM_BASE_URL": "http://127.0.0.1:9/v1", "MEMFLEET_LLM_MAX_ATTEMPTS": "1",
              "MEMFLEET_MAX_TRIES": "1"}


def memfleet(settings: Settings, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.cli", *args],
                          env={**worker_env(settings), **env}, capture_output=True, text=True,
                          timeout=120)


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The one stderr line of a command that exited ``code``, with no traceback."""
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def hand_over(settings: Settings, tmp_path: Path, session: str) -> None:
    path = tmp_path / f"{session}.json"
    path.write_text(json.dumps([{"role": "user", "content": "I live in Porto."}]), "utf-8")
    done = memfleet(settings, "enqueue", "--session", session, "--user", "u1",
                    "--messages", str(path))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["runs", "--limit", "-1"], "memfleet: --limit needs a positive integer, not -1"),
    (["runs", "--limit", "0"], "memfleet: --limit needs a positive integer, not 0"),
    (["runs", "--outcome", "bogus"],
     "memfleet: unknown outcome 'bogus' (one of: failed, skipped, invalid, error)"),
    (["runs", "--outcome", "committed"],
     "memfleet: 'committed' is not a dead-letter outcome (one of: failed, skipped, invalid, "
     "error)"),
    (["retry", "--session", "s1"],
     "memfleet: retry --session needs --user (sessions are per user)"),
    (["retry", "--failed", "--user", "u1"],
     "memfleet: retry --failed takes no --user: it re-drives every session whose open dead "
     "letter ended failed"),
])
def test_a_mistake_is_one_line_and_exit_2(
    settings: Settings, args: list[str], said: str
) -> None:
    done = memfleet(settings, *args)
    assert one_line(done, 2) == said and done.stdout == ""


@pytest.mark.parametrize(("args", "stdout", "said"), [
    (["runs"], "", "memfleet: no open dead letter (`memfleet runs --all` lists resolved ones)"),
    (["runs", "--all"], "", "memfleet: no dead letter"),
    (["runs", "--json"], "[]\n",
     "memfleet: no open dead letter (`memfleet runs --all` lists resolved ones)"),
    (["retry", "--failed"], "", "memfleet: no open dead letter ended failed: nothing to retry"),
])
def test_nothing_to_show_or_do_says_so_on_stderr_and_exits_0(
    settings: Settings, args: list[str], stdout: str, said: str
) -> None:
    done = memfleet(settings, *args)
    assert one_line(done, 0) == said and done.stdout == stdout


def test_retry_tells_a_healthy_session_from_a_typo(settings: Settings, tmp_path: Path) -> None:
    hand_over(settings, tmp_path, "s1")
    assert memfleet(settings, "worker", "--burst").returncode == 0
    healthy = memfleet(settings, "retry", "--session", "s1", "--user", "u1")
    assert (healthy.returncode, healthy.stderr) == (0, "")
    assert healthy.stdout == ("u1 s1: healthy: nothing to retry (no open dead letter, no "
                              "hand-over waiting: its memory is up to date)\n")
    typo = memfleet(settings, "retry", "--session", "s2", "--user", "u1")
    assert one_line(typo, 2).startswith(
        "memfleet: no run recorded and no hand-over in Redis for session 's2' of user 'u1'")


def test_the_workers_shutdown_line_counts_the_job_that_failed(
    settings: Settings, tmp_path: Path
) -> None:
    hand_over(settings, tmp_path, "s1")
    done = memfleet(settings, "worker", "--burst", **MODEL_DOWN)
    assert done.returncode == 0, done.stderr[-2000:]
    (shutdown,) = [line for line in done.stderr.splitlines() if line.startswith("shutdown")]
    assert "◆ 0 jobs complete ◆ 1 failed ◆ 0 retries ◆ 0 ongoing" in shutdown, shutdown
    listed = memfleet(settings, "runs")
    assert (listed.returncode, listed.stderr) == (0, "")
    (letter,) = listed.stdout.splitlines()
    assert " open " in letter and " failed " in letter and "attempts=1" in letter
