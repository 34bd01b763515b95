"""The neighbour query on a real PostgreSQL with pgvector: exact top-k of one user's
active facts per candidate, nearest first, ties by id, and the user's version."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import numpy as np
import pytest

from tests.conftest import TEST_EMBED_DIM
from tests.helpers import fences_for_tests
from worker.store.pool import GENERIC_PLANS, create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import NeighborRow, Neighbors
from worker.vectors import Vector

_OBSERVED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _pair(found: Neighbors) -> tuple[int, list[list[NeighborRow]]]:
    return found.version, found.rows


def _at(degrees: float) -> np.ndarray:
    """A unit vector in the plane of the first two axes, at this angle."""
    vector = np.zeros(TEST_EMBED_DIM, dtype=np.float32)
    vector[0] = math.cos(math.radians(degrees))
    vector[1] = math.sin(math.radians(degrees))
    return vector


def _matrix(*degrees: float) -> Vector:
    return np.stack([_at(d) for d in degrees])


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[PostgresStore]:
    pool = await create_pool(database_url, max_size=2, server_settings=GENERIC_PLANS)
    yield PostgresStore(pool, fences_for_tests())
    await pool.close()


async def _fact(db: asyncpg.Connection, user: str, text: str, degrees: float,
                *, superseded: bool = False) -> int:
    literal = "[" + ",".join(f"{x:.6f}" for x in _at(degrees)) + "]"
    fact_id: int = await db.fetchval(
        "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
        " embedding_model, observed_at, superseded_at)"
        " VALUES ($1, $2, 'fact', 5, $3::halfvec, 'test', $4, $5) RETURNING id",
        user, text, literal, _OBSERVED, _OBSERVED if superseded else None,
    )
    return fact_id


async def test_top_k_per_candidate_of_one_users_active_facts(
    db: asyncpg.Connection, store: PostgresStore
) -> None:
    same = await _fact(db, "alice", "same", 0)
    thirty = await _fact(db, "alice", "thirty", 30)
    sixty = await _fact(db, "alice", "sixty", 60)
    await _fact(db, "alice", "old, superseded", 0, superseded=True)
    thirty_again = await _fact(db, "alice", "thirty again", 30)  # a tie, larger id
    await _fact(db, "bob", "bob's, identical to the candidate", 0)
    await db.execute("INSERT INTO user_memory_state (user_id, version) VALUES ('alice', 7)")

    version, neighbors = _pair(await store.neighbors("alice", _matrix(0, 90), 3))

    assert version == 7
    assert [[row.id for row in rows] for rows in neighbors] == [
        [same, thirty, thirty_again],  # sixty is fourth: cut by k
        [sixty, thirty, thirty_again],  # same is at 90 degrees: last
    ]
    first = neighbors[0]
    assert [row.text for row in first] == ["same", "thirty", "thirty again"]
    assert first[0].observed_at == _OBSERVED
    # halfvec keeps about three significant digits
    assert [round(row.distance, 3) for row in first] == [0.0, round(1 - math.cos(math.pi / 6), 3),
                                                          round(1 - math.cos(math.pi / 6), 3)]
    # A tie at the cut keeps the older row.
    cut = (await store.neighbors("alice", _matrix(0), 2)).rows
    assert [row.id for row in cut[0]] == [same, thirty]


async def test_a_user_without_facts_gets_no_neighbours_and_version_zero(
    db: asyncpg.Connection, store: PostgresStore
) -> None:
    await _fact(db, "bob", "bob's", 0)
    version, neighbors = _pair(await store.neighbors("carol", _matrix(0, 45), 5))
    assert (version, neighbors) == (0, [[], []])


async def test_no_candidates_asks_nothing(store: PostgresStore) -> None:
    version, neighbors = _pair(await store.neighbors("alice", np.zeros((0, TEST_EMBED_DIM),
                                                                 dtype=np.float32), 5))
    assert (version, neighbors) == (0, [])
