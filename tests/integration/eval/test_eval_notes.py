"""`memfleet eval`'s notes kind (docs/notes.md, docs/eval.md): on the offline rules, with
notes on, recurring notes are promoted and the others are not; without the setting the
kind is left out of a run, and naming it is a mistake (exit 2)."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from tests.helpers import worker_env
from tests.integration.eval.test_eval import _eval, _figures, _leftovers, _memfleet
from worker.config import Settings

NOTES_RULES = (26, 26)  # measured: docs/eval.md, "The notes kind"


async def test_notes_that_recur_are_promoted_and_the_others_are_not(
        settings: Settings, tmp_path: Path) -> None:
    env = worker_env(settings, notes_enabled="true")
    code, document, _ = _eval(env, tmp_path, "--kind", "notes", "--qa")
    assert code == 0
    assert _figures(document) == {"notes": NOTES_RULES}
    assert {k["kind"]: (k["exact"], k["questions"]) for k in document["qa"]["kinds"]} == {
        "notes": (10, 10)}
    assert {name: b["total"]["held"] for name, b in document["baselines"].items()} == \
        {"empty": 0, "raw-messages": 0, "latest-session": 0}
    # The promotion's fact is what held the scenario: below three sessions, no fact.
    by_id = {s["id"]: s for s in document["scenarios"]}
    assert all(c["held"] for c in by_id["notes-move"]["checks"])
    assert all(c["held"] for c in by_id["notes-twice"]["checks"])
    # Nothing of the run is left: its users' notes went with the erase too.
    assert await _leftovers(settings) == (0, [])
    conn = await asyncpg.connect(settings.database_url)
    try:
        assert await conn.fetchval(
            "SELECT count(*) FROM memory_note WHERE user_id LIKE 'eval-%'") == 0
    finally:
        await conn.close()
    # With fewer sessions than the setting asks for, the recurring notes stay notes.
    stricter = worker_env(settings, notes_enabled="true", notes_promote_sessions="4")
    _, fewer, _ = _eval(stricter, tmp_path, "--kind", "notes")
    assert _figures(fewer)["notes"][0] < NOTES_RULES[0]


def test_without_notes_the_kind_is_left_out_and_naming_it_is_a_mistake(
        settings: Settings) -> None:
    done = _memfleet(worker_env(settings), "eval", "--kind", "notes")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "memfleet: eval: --kind notes needs MEMFLEET_NOTES_ENABLED=true")
