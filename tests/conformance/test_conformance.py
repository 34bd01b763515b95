"""The conformance suite (conformance/, docs/conformance.md) against real servers: the
Python client's adapter passes every check; a deliberately broken adapter fails the
checks named for its bug, and the command exits 1; an adapter that answers garbage,
dies or hangs fails its checks with that reason and in bounded time; the TypeScript
client's adapter passes once it is built."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from conformance.registry import all_checks
from conformance.runner import run_checks, select
from conformance.stack import Stack, running_stack
from tests.typescript_node import PACKAGE, require_build

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
PYTHON_ADAPTER = f"{PY} -m conformance.adapters.python_adapter"
BROKEN_ADAPTER = f"{PY} -m conformance.adapters.broken_adapter"
TS_PACKAGE = PACKAGE  # tests/typescript_node.py names the directory once
TS_ADAPTER = TS_PACKAGE / "dist" / "conformance" / "adapter.js"
LINE = re.compile(r"(PASS|FAIL) (\w+)(: .+)?")
SUMMARY = re.compile(r"(\d+) passed, (\d+) failed of (\d+) checks in [\d.]+ s")
NAMES = [c.name for c in all_checks()]


def _suite(*args: str, timeout_s: float = 150) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([PY, "-m", "conformance", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def _outcomes(stdout: str) -> dict[str, str]:
    """check name -> "PASS" or the FAIL line's reason; the summary line checked."""
    *lines, last = stdout.strip().splitlines()
    found = {}
    for line in lines:
        match = LINE.fullmatch(line)
        assert match, f"not a check line: {line!r}"
        found[match.group(2)] = "PASS" if match.group(1) == "PASS" else match.group(3)[2:]
    summary = SUMMARY.fullmatch(last)
    assert summary, f"not a summary: {last!r}"
    failed = sum(v != "PASS" for v in found.values())
    assert summary.groups() == (str(len(found) - failed), str(failed), str(len(found)))
    return found


def test_the_python_adapter_passes_every_check() -> None:
    started = time.monotonic()
    run = _suite("--adapter", PYTHON_ADAPTER)
    assert run.returncode == 0, run.stdout + run.stderr
    outcomes = _outcomes(run.stdout)
    assert list(outcomes) == NAMES
    assert set(outcomes.values()) == {"PASS"}, outcomes
    assert time.monotonic() - started < 60


def test_a_broken_adapter_fails_the_named_checks_and_exits_1() -> None:
    """The default bug: messages written {"content", "role"}."""
    run = _suite("--adapter", BROKEN_ADAPTER)
    assert run.returncode == 1, run.stdout + run.stderr
    outcomes = _outcomes(run.stdout)
    failed = {name: why for name, why in outcomes.items() if why != "PASS"}
    assert set(failed) == {"payload_bytes_exact", "payload_optional_fields", "merge_extends"}
    assert '"messages":[{"content":"Be brief.","role":"s' in failed["payload_bytes_exact"]
    assert "kept_older': True" in failed["merge_extends"]


@pytest.mark.parametrize(("flags", "want"), [
    (("--adapter", ""), "conformance: --adapter: the command is empty"),
    (("--adapter", "no-such-program-x"), "conformance: --adapter: no program 'no-such-program-x'"),
    (("--adapter", "cat", "-k", "nothing-named-so"),
     "conformance: -k 'nothing-named-so' names no check"),
    (("--adapter", "cat", "--transport", "ftp"), "conformance: argument --transport: invalid"),
    ((), "conformance: the following arguments are required: --adapter"),
])
def test_usage_mistakes_exit_2_with_one_line(flags: tuple[str, ...], want: str) -> None:
    run = _suite(*flags, timeout_s=30)
    assert run.returncode == 2
    assert run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith(want), run.stderr


@pytest.mark.parametrize("transport", ["redis", "http"])
def test_the_typescript_adapter_passes_every_check(transport: str) -> None:
    """The TypeScript client over Redis, and in its HTTP mode against the memory API
    (`make test` builds it first: a missing build fails, it does not skip)."""
    require_build()
    run = _suite("--adapter", f"node {TS_ADAPTER.relative_to(ROOT)}", "--transport", transport)
    assert run.returncode == 0, run.stdout + run.stderr
    outcomes = _outcomes(run.stdout)
    assert list(outcomes) == NAMES
    assert set(outcomes.values()) == {"PASS"}, outcomes


# ---------------------------------------------------------------- one stack, many adapters


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack() -> AsyncIterator[Stack]:
    async with running_stack() as running:
        yield running


async def _failed(stack: Stack, command: str, pattern: str | None = None,
                  **options: float) -> dict[str, str]:
    results = await run_checks(stack, command, "redis", select(pattern), **options)
    return {r.name: r.reason for r in results if not r.passed}


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("bug", "caught_by"), [
    ("ascii-escape", {"payload_bytes_exact", "payload_optional_fields", "merge_extends"}),
    ("no-window", {"long_session_window"}),
    ("one-error-kind", {"message_too_large"}),
    ("tag-unescaped", {"session_tag_hmac"}),
    ("wait-early", {"wait_needs_older_lists"}),
])
async def test_each_bug_is_caught_by_its_checks(stack: Stack, bug: str,
                                                caught_by: set[str]) -> None:
    assert set(await _failed(stack, f"{BROKEN_ADAPTER} --bug {bug}")) == caught_by


GARBAGE = "import sys; sys.stdin.readline(); print('hello', flush=True); sys.stdin.read()"
DIES = ("import sys; sys.stdin.readline(); print('{\"id\":1,\"ok\":true,\"result\":{}}',"
        " flush=True); sys.stdin.readline(); print('cannot go on', file=sys.stderr); sys.exit(3)")
HANGS = ("import sys, time; sys.stdin.readline(); print('{\"id\":1,\"ok\":true,\"result\":{}}',"
         " flush=True); time.sleep(600)")


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("program", "reason"), [
    (GARBAGE, "adapter broke the protocol: configure (idle session): reply to 'configure'"
              " is not JSON: 'hello"),
    (DIES, "adapter broke the protocol: the adapter closed stdout on 'handover' (exit 3;"
           " stderr: cannot go on)"),
    (HANGS, "adapter broke the protocol: no reply to 'handover' within 1 s"),
])
async def test_an_adapter_that_breaks_the_protocol_fails_in_bounded_time(
    stack: Stack, program: str, reason: str, tmp_path: Path,
) -> None:
    script = tmp_path / "adapter.py"
    script.write_text(program)
    started = time.monotonic()
    failed = await _failed(stack, f"{PY} {script}", "payload_*", request_timeout_s=1)
    assert set(failed) == {"payload_bytes_exact", "payload_optional_fields"}, failed
    assert failed["payload_bytes_exact"].startswith(reason), failed
    assert time.monotonic() - started < 8
