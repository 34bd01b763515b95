"""The memory API and the LLM stub as processes of their own, for benches that talk to
them over real HTTP: started on free loopback ports, waited for, stopped."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.lib.servers import Servers

SECRET = "bench-secret-" + "0123456789abcdef" * 2  # a throwaway bench key
START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api_env(servers: Servers, **settings: str) -> dict[str, str]:
    """This environment without MEMFLEET_* of its own, on the bench's servers, its erase
    fence key (servers.root/home) and ``settings`` (MEMFLEET_ names without the prefix)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env.update({"MEMFLEET_DATABASE_URL": servers.database_url,
                "MEMFLEET_REDIS_URL": servers.redis_url, "MEMFLEET_JWT_SECRET": SECRET,
                "MEMFLEET_HOME_DIR": str(servers.root / "home")})
    env.update({f"MEMFLEET_{name.upper()}": value for name, value in settings.items()})
    return env


def wait_healthy(url: str, proc: subprocess.Popen[bytes], path: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    with httpx.Client(base_url=url, timeout=2) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited during start-up")
            try:
                if client.get(path).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise RuntimeError(f"{proc.args!r} did not answer within {START_TIMEOUT_S:g} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running(argv: list[str], env: dict[str, str], url: str, health: str, *,
            cwd: Path | None = None) -> Iterator[int]:
    """``argv`` as a process (its output dropped), up once ``url + health`` answers 200;
    yields its pid, stopped on exit."""
    proc = subprocess.Popen(argv, env=env, cwd=cwd,  # noqa: S603 - our own modules
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(url, proc, health)
        yield proc.pid
    finally:
        stop(proc)


def api_argv(port: int, *, workers: int = 1, tree: Path | None = None) -> list[str]:
    """``memfleet api``, as the API is run for real; in a ``tree`` of a revision from
    before worker/api/ (bench.ab.api_ab, bench.long_polls), its ``python -m api_stub.serve``."""
    old = tree is not None and not (tree / "worker" / "api" / "serve.py").exists()
    entry = ["api_stub.serve"] if old else ["worker.cli", "api"]
    return [sys.executable, "-m", *entry, "--port", str(port),
            "--log-level", "warning", "--workers", str(workers)]


def stub_argv(port: int) -> list[str]:
    """The project's OpenAI-compatible stub (api_stub.llm_stub) without its access log."""
    return [sys.executable, "-m", "uvicorn", "api_stub.llm_stub:create_app", "--factory",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
            "--no-access-log"]
