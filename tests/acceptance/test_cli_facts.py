"""`memfleet facts` reads like the memory API: scope, agent and the two "as of" times."""

from __future__ import annotations

import json
from typing import Any

from tests.acceptance.test_cli import memfleet
from tests.contract.test_store_contract import vec
from tests.contract.test_store_reads import paris_then_lisbon
from tests.helpers import fences_for_tests, worker_env
from worker.config import Settings
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import FactTerms, NewFact

DESIGN_FIELDS = {"id", "text", "category", "importance", "observed_at", "source_session_id",
                 "superseded_at", "superseded_by"}
MODEL_FIELDS = {"scope", "agent_id", "valid_from", "valid_to", "expires_at", "pinned", "basis",
                "confidence", "superseded_reason", "embedding_model", "embedding_dim",
                "written_via"}


async def remembered(settings: Settings) -> None:
    """u1: Paris then Lisbon (back-dated), and a relationship fact with each of two agents."""
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=1)
    try:
        store = PostgresStore(pool, fences_for_tests())
        await paris_then_lisbon(store)
        for agent, text in (("sam", "Calls the assistant Sam"), ("max", "Plays chess with Max")):
            await store.add_fact("u1", NewFact(text, "relationship", 5, vec(1), "test", FactTerms(
                scope="relationship", agent_id=agent, confidence=1.0)))
    finally:
        await pool.close()


def facts(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    done = memfleet(env, "facts", "--user", "u1", "--json", *args)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    assert all(set(row) >= DESIGN_FIELDS | MODEL_FIELDS for row in rows)
    return rows


def texts(env: dict[str, str], *args: str) -> list[str]:
    return sorted(row["text"] for row in facts(env, *args))


async def test_facts_by_scope_agent_and_time(settings: Settings) -> None:
    await remembered(settings)
    env = worker_env(settings)
    assert texts(env) == ["Calls the assistant Sam", "Lives in Lisbon", "Plays chess with Max"]
    assert texts(env, "--scope", "both") == ["Lives in Lisbon"], "no agent: the profile only"
    assert texts(env, "--agent", "sam") == ["Calls the assistant Sam", "Lives in Lisbon"]
    assert texts(env, "--agent", "max") == ["Lives in Lisbon", "Plays chess with Max"]
    assert texts(env, "--scope", "relationship", "--agent", "max") == ["Plays chess with Max"]
    assert texts(env, "--scope", "profile", "--agent", "max") == ["Lives in Lisbon"]
    assert texts(env, "--scope", "none", "--agent", "max") == []
    assert texts(env, "--all", "--agent", "sam") == [
        "Calls the assistant Sam", "Lives in Lisbon", "Lives in Paris"]
    assert texts(env, "--valid-at", "2026-09-15") == ["Lives in Paris"]
    assert texts(env, "--valid-at", "2026-10-15T08:00:00+02:00") == ["Lives in Lisbon"]
    assert texts(env, "--known-at", "2026-11-01") == ["Lives in Paris"]
    assert texts(env, "--known-at", "2026-11-01", "--agent", "sam") == ["Lives in Paris"]
    (max_fact,) = facts(env, "--scope", "relationship", "--agent", "max")
    assert (max_fact["scope"], max_fact["agent_id"], max_fact["source_kind"]) == (
        "relationship", "max", "manual")
    (paris,) = facts(env, "--valid-at", "2026-09-15")
    assert (paris["valid_from"], paris["valid_to"]) == ("2024-01-01T00:00:00+00:00",
                                                        "2026-10-01T00:00:00+00:00")
    plain = memfleet(env, "facts", "--user", "u1", "--agent", "sam")
    assert "Calls the assistant Sam  (relationship @sam)" in plain.stdout
    assert "Plays chess with Max" not in plain.stdout


async def test_bad_facts_flags_are_one_line_and_exit_2(settings: Settings) -> None:
    env = worker_env(settings)
    for args, says in (
        (["--valid-at", "last tuesday"], "--valid-at needs an ISO date"),
        (["--known-at", "2026-13-01"], "--known-at needs an ISO date"),
        (["--valid-at", "2026-01-01", "--known-at", "2026-01-01"], "cannot be combined"),
        (["--all", "--known-at", "2026-01-01"], "cannot be combined"),
        (["--scope", "relationship"], "needs --agent"),
    ):
        done = memfleet(env, "facts", "--user", "u1", *args)
        assert done.returncode == 2, (args, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("memfleet: ") and says in line
    wrong = memfleet(env, "facts", "--user", "u1", "--scope", "everything")
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr
