"""docs/python_client.md's examples, run as written: each Python block under "An
example that runs", a program of its own, against the real memory API and a real
`memfleet worker` process. A renamed method or argument fails here, not on a
reader's machine."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.api_server import new_key
from tests.helpers import WorkerProcesses
from worker.store.service_keys import ServiceKeyStore

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "python_client.md"


def runnable_blocks() -> list[str]:
    """The Python blocks of the section "## An example that runs", as they are."""
    text = GUIDE.read_text("utf-8")
    start = text.index("## An example that runs")
    section = text[start:text.index("\n## ", start + 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 2, "the sync and the async example"
    return blocks


def run(block: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True,
                          text=True, timeout=120, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_the_guides_examples_run_against_a_real_api_and_worker(
    api_url: str, keys: ServiceKeyStore, worker: WorkerProcesses,
) -> None:
    key = await new_key(keys, "handover", "read")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")},
           "MEMFLEET_API_URL": api_url, "MEMFLEET_SERVICE_KEY": key,
           "PYTHONPATH": str(ROOT)}
    sync_example, async_example = runnable_blocks()
    out = await asyncio.to_thread(run, sync_example, env)
    assert out.splitlines()[0] == "covered"
    assert "Lives in Berlin" in out
    out = await asyncio.to_thread(run, async_example, env)
    assert out.startswith("Uses Rust ")
    assert key not in out
