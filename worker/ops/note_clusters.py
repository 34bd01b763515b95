"""Which of a user's notes recur (docs/notes.md): clusters, pure.

A cluster is a note and every other note closer to it than the distance (cosine),
kept when its notes come from at least the required number of distinct sessions.
Seeds are taken newest first and a note joins one cluster at most; a seed whose
notes do not come from enough sessions leaves them free for a later seed. Each
cluster is measured around its seed, not linked note to note, so it cannot drift
from a kitchen renovation to a new kitchen knife by small steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from worker.store.note_types import PromotableNote

NO_SESSION = ""  # a note without a session counts as one session of its own kind


@dataclass(frozen=True, slots=True)
class Cluster:
    notes: tuple[PromotableNote, ...]  # oldest first

    @property
    def newest(self) -> PromotableNote:
        return self.notes[-1]

    @property
    def sessions(self) -> int:
        return len({n.session_id or NO_SESSION for n in self.notes})


def clusters(notes: Sequence[PromotableNote], *, distance: float, sessions: int,
             limit: int) -> list[Cluster]:
    """At most ``limit`` clusters of ``notes`` (any order) closer than ``distance`` to their
    seed, each from ``sessions`` sessions or more, the newest seed first."""
    if not notes or limit < 1:
        return []
    ordered = sorted(notes, key=lambda n: (n.observed_at, n.id), reverse=True)
    matrix = np.stack([np.asarray(n.embedding, dtype=np.float32) for n in ordered])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    distances = 1.0 - unit @ unit.T
    free = np.ones(len(ordered), dtype=bool)
    found: list[Cluster] = []
    for seed in range(len(ordered)):
        if not free[seed]:
            continue
        members = np.flatnonzero(free & (distances[seed] < distance))
        cluster = Cluster(tuple(sorted((ordered[i] for i in members),
                                       key=lambda n: (n.observed_at, n.id))))
        if cluster.sessions < sessions:
            continue
        free[members] = False
        found.append(cluster)
        if len(found) == limit:
            break
    return found
