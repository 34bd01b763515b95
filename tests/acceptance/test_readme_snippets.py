"""README's Python snippets run as written, against real servers.

Each ```python block of README.md is executed as a module of its own, with the
fleet's settings in the environment (MEMFLEET_*, as a chat server beside the fleet
has them) and nothing else given; what the blocks define is then called as a chat
server calls it: a turn handed over, a worker storing it, the next prompt reading
it back, and the hand-over's two errors logged, not raised.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.helpers import drain, worker_env
from worker.config import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the first line, source) of every ```python block."""
    blocks: list[tuple[int, str]] = []
    lines: list[str] | None = None
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        if lines is None and line.strip() == "```python":
            lines, start = [], number + 1
        elif lines is not None and line.strip() == "```":
            blocks.append((start, "\n".join(lines)))
            lines = None
        elif lines is not None:
            lines.append(line)
    return blocks


def run_block(start: int, source: str) -> dict[str, Any]:
    """The block as a module: its namespace. Errors point at README's own lines."""
    namespace: dict[str, Any] = {"__name__": f"readme_line_{start}"}
    exec(compile("\n" * (start - 1) + source, str(README), "exec"), namespace)  # noqa: S102
    return namespace


@pytest.fixture
def fleet_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment of a chat server beside the fleet: the fleet's MEMFLEET_*."""
    for name in [name for name in os.environ if name.startswith("MEMFLEET_")]:
        monkeypatch.delenv(name)
    for name, value in worker_env(settings).items():
        if name.startswith("MEMFLEET_"):
            monkeypatch.setenv(name, value)


@pytest.fixture
async def snippets(fleet_env: None) -> AsyncIterator[list[dict[str, Any]]]:
    """Every block's namespace; the Redis clients they open closed afterwards."""
    namespaces = [run_block(start, source)
                  for start, source in python_blocks(README.read_text(encoding="utf-8"))]
    yield namespaces
    for namespace in namespaces:
        for value in namespace.values():
            if isinstance(value, Redis):
                await value.aclose()


def defining(namespaces: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (namespace,) = [ns for ns in namespaces if name in ns]
    return namespace


async def test_every_python_block_of_the_readme_runs_as_a_module(
    snippets: list[dict[str, Any]],
) -> None:
    # The hand-over and the prompt's read, which a chat server copies.
    assert len(snippets) >= 1
    defining(snippets, "after_answering")
    defining(snippets, "system_prompt")


async def test_a_turn_handed_over_by_the_readme_reaches_the_next_prompt(
    settings: Settings, snippets: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    hand_over, read = defining(snippets, "after_answering"), defining(snippets, "system_prompt")
    messages = [{"role": "user", "content": "I live in Porto."}]
    with caplog.at_level(logging.WARNING):
        await hand_over["after_answering"]("s1", "u1", messages)
    # asyncio's aside: a test before this one in the process may leave a client whose
    # collection asyncio reports here ("Task exception was never retrieved"), which
    # says nothing about the hand-over.
    said = [r for r in caplog.records if r.name != "asyncio"]
    assert said == [], "a good turn is handed over without a word"
    assert (await drain(settings))["complete"] == 1

    await read["serve"]()  # the reader opens on Settings() from the environment, and closes
    async with read["open_reader"](read["Settings"]()) as reader:
        prompt = await read["system_prompt"](reader, "u1", messages)
        nobody = await read["system_prompt"](reader, "u2", messages)
    assert prompt.startswith(read["BASE_PROMPT"] + "\n\n")
    assert "Lives in Porto" in prompt
    assert nobody == read["BASE_PROMPT"], "no memory, no block"


async def test_the_readme_hand_over_logs_its_two_errors_and_raises_neither(
    snippets: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    hand_over = defining(snippets, "after_answering")
    with caplog.at_level(logging.WARNING):
        await hand_over["after_answering"]("s1", "u1", [{"role": "wizard", "content": "x"}])
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "memory hand-over refused"]

    caplog.clear()
    await hand_over["redis"].aclose()
    hand_over["redis"] = Redis.from_url("redis://127.0.0.1:9/0")  # nothing listens there
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        await hand_over["after_answering"]("s1", "u1", [{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < 3
    assert [r.getMessage() for r in caplog.records] == ["memory hand-over skipped"]
