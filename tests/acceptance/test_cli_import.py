"""`memfleet import` and `memfleet expire` as an operator runs them: subprocesses, real servers."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.acceptance.test_cli import memfleet
from tests.helpers import worker_env
from worker.config import Settings

PRIVATE = "Lives in Porto"


def write_lines(path: Path, *lines: object) -> str:
    path.write_bytes(b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n"
        for line in lines))
    return str(path)


async def test_import_twice_then_expire(settings: Settings, tmp_path: Path) -> None:
    env = worker_env(settings)
    soon = datetime.now(UTC) + timedelta(seconds=3)
    facts = write_lines(
        tmp_path / "facts.jsonl",
        {"user_id": "u1", "text": PRIVATE, "id": "1", "category": "fact"},
        {"user_id": "u1", "text": "Is in Paris", "expires_at": soon.isoformat()},
        {"user_id": "u2", "text": PRIVATE},
        {"user_id": "u2", "text": "Secret plans", "importance": 99},
    )

    first = memfleet(env, "import", "--file", facts)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"read": 4, "imported": 3, "duplicates": 0, "invalid": 1,
                                        "skipped": 0}
    assert first.stderr.strip() == (
        "memfleet: facts.jsonl line 4: importance must be an integer from 1 to 10")
    second = memfleet(env, "import", "--file", facts)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["imported"] == 0
    assert json.loads(second.stdout)["duplicates"] == 3

    # --all: reads skip "Is in Paris" from its expiry on, which may have come by now.
    shown = json.loads(memfleet(env, "facts", "--user", "u1", "--json", "--all").stdout)
    assert sorted(f["text"] for f in shown) == ["Is in Paris", PRIVATE]
    assert {f["source_kind"] for f in shown} == {"imported"}
    assert all(f["superseded_at"] is None for f in shown), "only the pass supersedes"
    assert [f["text"] for f in json.loads(
        memfleet(env, "facts", "--user", "u2", "--json").stdout)] == [PRIVATE]

    await asyncio.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()) + 0.2)
    expired = memfleet(env, "expire")
    assert expired.returncode == 0, expired.stderr
    assert json.loads(expired.stdout) == {"expired": 1}
    every = json.loads(memfleet(env, "facts", "--user", "u1", "--json", "--all").stdout)
    paris = next(f for f in every if f["text"] == "Is in Paris")
    assert paris["superseded_reason"] == "expired"
    assert datetime.fromisoformat(paris["superseded_at"]) == soon
    assert json.loads(memfleet(env, "expire").stdout) == {"expired": 0}


async def test_legacy_import_with_the_rules_extractor(settings: Settings, tmp_path: Path) -> None:
    env = worker_env(settings)
    blobs = write_lines(tmp_path / "legacy.jsonl",
                        {"user_id": "u1", "id": "b1", "text": "I live in Lisbon. I use Neovim."})
    first = memfleet(env, "import", "--legacy", blobs)
    assert first.returncode == 0, first.stderr
    counts = json.loads(first.stdout)
    assert (counts["read"], counts["extracted"], counts["imported"]) == (1, 2, 2)
    second = json.loads(memfleet(env, "import", "--legacy", blobs).stdout)
    assert (second["imported"], second["already_imported"]) == (0, 1)
    shown = json.loads(memfleet(env, "facts", "--user", "u1", "--json").stdout)
    assert sorted(f["text"] for f in shown) == ["Lives in Lisbon", "Uses Neovim"]
    assert {f["source_kind"] for f in shown} == {"backfill"}


async def test_an_import_with_nothing_to_read_fails(settings: Settings, tmp_path: Path) -> None:
    env = worker_env(settings)
    bad = write_lines(tmp_path / "bad.jsonl", b"\xff\xfe", {"user_id": "u1"})
    result = memfleet(env, "import", "--file", bad)
    assert result.returncode == 1
    assert json.loads(result.stdout)["invalid"] == 2
    assert "line 1: is not valid UTF-8" in result.stderr
    assert "Traceback" not in result.stderr
    empty = write_lines(tmp_path / "empty.jsonl")
    assert memfleet(env, "import", "--file", empty).returncode == 1
    missing = memfleet(env, "import", "--file", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2 and missing.stderr.startswith("memfleet: cannot read")
    both = memfleet(env, "import", "--file", bad, "--legacy", bad)
    assert both.returncode == 2
