"""`memfleet dev`, the newcomer's one command (issue 40): from nothing, the embedded servers,
the schema, a worker and the memory API; the lines it prints, pasted into a shell as they
are, hand a conversation over and read the fact back; the panel link's token reads the
user's memory; Ctrl-C stops it all and revokes its key; a dev killed outright takes its
worker and API with it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.acceptance.test_first_hour_cli import clean_env
from worker.embedded import embedded_running, free_port

pytestmark = pytest.mark.skipif(not Path("/usr/bin/curl").exists() and not any(
    (Path(p) / "curl").exists() for p in os.environ.get("PATH", "").split(":")),
    reason="the printed lines use curl")

READY_S = 150.0  # PostgreSQL's first initdb, then two processes importing everything


def start_dev(env: dict[str, str], cwd: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "worker.cli", "dev", "--port", str(port)],
                            env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def printed(dev: subprocess.Popen[str]) -> list[str]:
    """dev's stdout up to its last line (the logs' line), once it is running."""
    assert dev.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        line = dev.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("# Logs: "):
            return lines
    dev.kill()
    said = dev.stderr.read() if dev.stderr else ""
    raise AssertionError(f"dev did not get ready: {lines} {said}")


def python_client_example() -> str:
    """docs/python_client.md's first Python block (it reads MEMFLEET_API_URL and
    MEMFLEET_SERVICE_KEY, which dev exports)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "python_client.md").read_text()
    return doc.split("```python\n", 1)[1].split("```", 1)[0]


def memfleet(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def worker_and_api_pids(home: Path) -> list[int]:
    """The processes dev ran: `python -m worker.cli worker|api`, whose environment names
    this home's servers (by the dev's own children alone)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"worker.cli" in argv and (b"worker" in argv[-2:] or b"api" in argv) \
                and str(home).encode() in environ:
            found.append(int(proc.name))
    return found


def test_dev_runs_it_all_and_its_printed_lines_store_a_fact_read_back(tmp_path: Path) -> None:
    home = tmp_path / ".memfleet"
    env = clean_env(home)
    port = free_port()
    dev = start_dev(env, tmp_path, port)
    try:
        lines = printed(dev)
        exports = dict(line.removeprefix("export ").split("=", 1) for line in lines
                       if line.startswith("export "))
        assert exports["MEMFLEET_API_URL"] == f"http://127.0.0.1:{port}"
        assert exports["MEMFLEET_SERVICE_KEY"].startswith("mfk_")
        # The lines as a user pastes them, in a shell.
        script = "\n".join(line for line in lines if not line.startswith("#"))
        ran = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                             text=True, timeout=60, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        waited, known = (json.loads(line) for line in ran.stdout.strip().splitlines())
        assert waited["covered"] is True
        # The offline extractor's introduction, home and work (issue 40's wider rules).
        assert known["count"] == 3, known
        for fact in ("Name is Grace", "Lives in Oslo", "Works with Rust"):
            assert f"] {fact} (" in known["block"], known
        # The panel link's token reads ada's memory, and nobody else's.
        [panel] = [line for line in lines if "/panel#token=" in line]
        token = panel.split("#token=", 1)[1]
        bearer = {"Authorization": f"Bearer {token}"}
        api = exports["MEMFLEET_API_URL"]
        facts = httpx.get(f"{api}/users/ada/facts", headers=bearer, timeout=10)
        assert facts.status_code == 200 and "Lives in Oslo" in facts.text
        assert httpx.get(f"{api}/users/bob/facts", headers=bearer, timeout=10).status_code == 403
        # `memfleet token` with the key file dev names mints a token the API takes.
        [minting] = [line for line in lines if "memfleet token --user ada" in line]
        secret_file = minting.split("--secret-file ", 1)[1].split("`", 1)[0]
        minted = memfleet(env, tmp_path, "token", "--user", "ada", "--secret-file", secret_file)
        assert minted.returncode == 0, minted.stderr
        assert httpx.get(f"{api}/users/ada/facts", timeout=10, headers={
            "Authorization": f"Bearer {minted.stdout.strip()}"}).status_code == 200
        assert len(worker_and_api_pids(home)) == 2
        # The Python client's first example runs on the two lines dev exported, as pasted.
        example = python_client_example()
        ran = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True,
                             timeout=60, cwd=tmp_path, env={**env, **exports})
        assert ran.returncode == 0 and "covered" in ran.stdout, ran.stderr[-2000:]
        assert "Lives in Berlin" in ran.stdout

        # Ctrl-C: everything it ran or started stops; the key is revoked.
        dev.send_signal(signal.SIGINT)
        assert dev.wait(60) == 0
        assert dev.stderr is not None and "dev stopped" in dev.stderr.read()
        assert not listening(port) and worker_and_api_pids(home) == []
        assert not embedded_running(home, postgres=True, redis=False)
        assert not embedded_running(home, postgres=False, redis=True)
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()
    try:
        assert memfleet(env, tmp_path, "up").returncode == 0
        keys = json.loads(memfleet(env, tmp_path, "keys", "list", "--json").stdout)
        key = exports["MEMFLEET_SERVICE_KEY"]
        [dev_key] = [k for k in keys if key.startswith(f"mfk_{k['id']}_")]
        assert dev_key["revoked_at"] is not None
    finally:
        memfleet(env, tmp_path, "down")


def test_a_dev_killed_outright_takes_its_worker_and_api_with_it(tmp_path: Path) -> None:
    home = tmp_path / ".memfleet"
    env = clean_env(home)
    port = free_port()
    dev = start_dev(env, tmp_path, port)
    try:
        printed(dev)
        assert len(worker_and_api_pids(home)) == 2
        dev.send_signal(signal.SIGKILL)
        dev.wait()
        deadline = time.monotonic() + 30
        while worker_and_api_pids(home) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert worker_and_api_pids(home) == [] and not listening(port)
    finally:
        if dev.poll() is None:
            dev.kill()
        for pid in worker_and_api_pids(home):
            os.kill(pid, signal.SIGKILL)
        memfleet(env, tmp_path, "down")


def test_dev_leaves_running_the_servers_it_found_running(tmp_path: Path) -> None:
    home = tmp_path / ".memfleet"
    env = clean_env(home)
    assert memfleet(env, tmp_path, "up").returncode == 0
    dev = start_dev(env, tmp_path, free_port())
    try:
        printed(dev)
        dev.send_signal(signal.SIGINT)
        assert dev.wait(60) == 0
        assert dev.stderr is not None
        assert "dev stopped: the worker and the memory API\n" in dev.stderr.read()
        # `memfleet up` started them: they are its to stop, with `memfleet down`.
        assert embedded_running(home, postgres=True, redis=True)
        assert worker_and_api_pids(home) == []
    finally:
        if dev.poll() is None:
            dev.kill()
        memfleet(env, tmp_path, "down")
