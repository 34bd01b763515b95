"""Which notes recur (worker.ops.note_clusters): clusters around their seed, newest first,
kept from enough distinct sessions, each note in one at most."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from worker.ops.note_clusters import clusters
from worker.store.note_types import PromotableNote

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def note(note_id: int, session: str | None, vector: list[float], day: int) -> PromotableNote:
    return PromotableNote(note_id, f"note {note_id}", session, T0 + timedelta(days=day),
                          np.asarray(vector, dtype=np.float32))


def test_a_topic_from_three_sessions_is_one_cluster_oldest_first() -> None:
    notes = [note(1, "a", [1, 0, 0], 0), note(2, "b", [1, 0.1, 0], 5),
             note(3, "c", [1, 0, 0.1], 9), note(4, "c", [0, 1, 0], 10)]
    (found,) = clusters(notes, distance=0.15, sessions=3, limit=10)
    assert [n.id for n in found.notes] == [1, 2, 3] and found.newest.id == 3
    assert found.sessions == 3


def test_fewer_sessions_than_asked_for_is_no_cluster() -> None:
    notes = [note(1, "a", [1, 0], 0), note(2, "a", [1, 0], 1), note(3, "b", [1, 0], 2)]
    assert clusters(notes, distance=0.15, sessions=3, limit=10) == []
    assert len(clusters(notes, distance=0.15, sessions=2, limit=10)) == 1


def test_a_cluster_is_measured_around_its_seed_and_does_not_drift() -> None:
    # Five notes, each 30 degrees from the next (cosine distance 0.13): linked note to
    # note they would make one topic of five sessions; around a seed, at most the seed
    # and its two neighbours are within the distance.
    angle = np.radians(30)
    steps = [[np.cos(k * angle), np.sin(k * angle)] for k in range(5)]
    notes = [note(k + 1, f"s{k}", v, k) for k, v in enumerate(steps)]
    assert clusters(notes, distance=0.15, sessions=4, limit=10) == []
    (found,) = clusters(notes, distance=0.15, sessions=3, limit=10)
    assert [n.id for n in found.notes] == [3, 4, 5]


def test_the_limit_bounds_the_clusters_and_a_note_joins_one() -> None:
    notes = [note(i * 10 + s, f"s{s}", [1.0 if d == i else 0.0 for d in range(4)], i * 3 + s)
             for i in range(4) for s in range(3)]
    found = clusters(notes, distance=0.15, sessions=3, limit=2)
    assert len(found) == 2
    ids = [n.id for c in found for n in c.notes]
    assert len(ids) == len(set(ids)) == 6
    assert found[0].newest.observed_at > found[1].newest.observed_at, "newest seed first"
