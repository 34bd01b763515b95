"""memfleet_commit_run's persons argument covers the new facts, then the held additions
(schema/0020): each addition is held with the person it is about, and a caller of the
previous release, whose "facts" array covers the new facts alone, holds its additions
for the user, as it did."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from tests.conftest import TEST_EMBED_DIM
from tests.helpers import fences_for_tests
from worker.store import queries
from worker.store.person_types import NewPerson, PersonLabel, PersonWrites
from worker.store.pool import create_pool
from worker.store.run_commit import commit_arguments
from worker.store.types import (
    CursorAdvance,
    FactTerms,
    HoldProposal,
    InsertFact,
    RunCommit,
    RunRecord,
)

NOW = datetime(2026, 12, 8, 12, 0, tzinfo=UTC)
ANA = FactTerms(person=NewPerson(1))


def _commit(user: str) -> RunCommit:
    embedding = np.zeros(TEST_EMBED_DIM, dtype=np.float32)
    embedding[0] = 1.0
    return RunCommit(
        cursor=CursorAdvance(session_id="s1", user_id=user, expected_version=0,
                             last_hash="h", window_hash="w", position=0, processed=1,
                             user_turns=1),
        user_version=0, observed_at=NOW, embedding_model="test", source_session_id="s1",
        run=RunRecord(job_id=f"j-{user}", job_try=1, session_id="s1", user_id=user,
                      outcome="committed", started_at=NOW),
        writes=(InsertFact(ref=0, text="The user's sister Ana is vegetarian", category="fact",
                           importance=5, embedding=embedding, terms=ANA),
                HoldProposal(None, "ADD", "undecided", "Lives in Milan", category="fact",
                             importance=5),
                HoldProposal(None, "ADD", "undecided", "Ana is vegan", category="fact",
                             importance=5, terms=ANA)),
        persons=PersonWrites(create=(PersonLabel("Ana", "sister"),)))


@pytest.mark.parametrize("caller", ["this release", "the previous release"])
async def test_each_held_addition_keeps_its_person_unless_the_caller_names_none(
    database_url: str, caller: str
) -> None:
    user = "ada" if caller == "this release" else "bea"
    args: list[Any] = list(commit_arguments(_commit(user), fences_for_tests().of(user).hex()))
    persons = json.loads(args[-1])
    assert persons["facts"] == [{"new": 1}, None, {"new": 1}], "the fact's, then the holds'"
    if caller == "the previous release":
        persons["facts"] = persons["facts"][:1]  # its array covered p_texts alone
        args[-1] = json.dumps(persons)
    pool = await create_pool(database_url, min_size=1, max_size=1)
    try:
        await pool.fetchval(queries.load("pipeline")["commit_run"], *args)
        ana = await pool.fetchval("SELECT id FROM memory_person WHERE user_id = $1", user)
        fact = await pool.fetchval("SELECT person_id FROM memory_fact WHERE user_id = $1",
                                   user)
        held = await pool.fetch("SELECT text, person_id FROM memory_held_proposal"
                                " WHERE user_id = $1 ORDER BY id", user)
    finally:
        await pool.close()
    assert fact == ana
    about_ana = ana if caller == "this release" else None
    assert [tuple(h) for h in held] == [("Lives in Milan", None), ("Ana is vegan", about_ana)]
