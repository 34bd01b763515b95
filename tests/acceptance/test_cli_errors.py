"""Every command fails the way the README promises: one line, exit 2, and never a
secret or a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

SECRETS = {"MEMFLEET_EMBED_API_KEY": "sk-embed-0123456789abcdefXYZ",
           "MEMFLEET_JWT_SECRET": "jwt-secret-0123456789abcdefghijklmnopqrstuvwxyz",
           "MEMFLEET_TELEMETRY_ID_KEY": "telemetry-key-0123456789"}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    return subprocess.run([sys.executable, *args], env={**clean, **env}, capture_output=True,
                          text=True, timeout=120)


def assert_one_line_without_secrets(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for value in SECRETS.values():
        for tail in (value, value[-8:], value[:8]):
            assert tail not in done.stdout + done.stderr, tail
    return lines[0]


@pytest.mark.parametrize("command", [
    ["-m", "worker.cli", "facts", "--user", "u"],
    ["-m", "worker.cli", "worker", "--burst"],
    ["-m", "worker.cli", "api", "--port", "0"],
    ["-m", "api_stub.serve", "--port", "0"],
])
def test_a_settings_error_names_the_variable_and_no_value(command: list[str]) -> None:
    unused = f"127.0.0.1:{closed_port()}"
    line = assert_one_line_without_secrets(run(
        command, MEMFLEET_LLM_PROVIDER="openai", MEMFLEET_EMBED_PROVIDER="hashing",
        MEMFLEET_DATABASE_URL=f"postgresql://u@{unused}/db",
        MEMFLEET_REDIS_URL=f"redis://{unused}", **SECRETS))
    assert "MEMFLEET_LLM_BASE_URL" in line


@pytest.mark.parametrize("command", [
    ["-m", "worker.cli", "facts", "--user", "u"],
    ["-m", "worker.cli", "migrate"],
    ["-m", "worker.cli", "worker", "--burst"],
    ["-m", "worker.cli", "retry", "--failed"],
    ["-m", "worker.cli", "consent", "show", "--user", "u"],
    ["-m", "worker.cli", "export", "--user", "u"],
    ["-m", "worker.cli", "exporter"],
    ["-m", "worker.cli", "webhook", "--url", "http://127.0.0.1:9/hook", "--unsigned"],
    ["-m", "worker.cli", "api", "--port", "0"],
    ["-m", "api_stub.serve", "--port", "0"],
])
def test_servers_that_refuse_connections_are_one_line_and_exit_2(command: list[str]) -> None:
    unused = f"127.0.0.1:{closed_port()}"
    line = assert_one_line_without_secrets(run(
        command, MEMFLEET_DATABASE_URL=f"postgresql://u@{unused}/db",
        MEMFLEET_REDIS_URL=f"redis://{unused}", **SECRETS))
    assert "Traceback" not in line
    assert any(word in line for word in ("unreachable", "failed", "unavailable")), line
