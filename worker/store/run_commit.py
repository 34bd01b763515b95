"""A run's commit as the arguments of memfleet_commit_run: one round trip.

The routine (schema/routines/memfleet_commit_run.sql) takes the cursor and the
audit row as jsonb, the inserted facts as one array per column, and the
supersessions as (target, successor) pairs that name a row either by its id
or by its 1-based position among the inserts.
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import datetime
from typing import Any

from worker.store import halfvec
from worker.store.person_types import ExistingPerson, PersonRef
from worker.store.types import PROFILE, ExistingRow, HoldProposal, InsertFact, RunCommit


def flat_json(record: Any, **extra: Any) -> str:
    """A flat dataclass (datetimes as ISO strings) as JSON, for jsonb parameters.

    Shallow on purpose: ``dataclasses.asdict`` deep-copies every value first.
    """
    return json.dumps({**{f.name: getattr(record, f.name) for f in fields(record)}, **extra},
                      default=_iso)


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def commit_arguments(commit: RunCommit, fence_key: str) -> tuple[Any, ...]:
    """The parameters of the ``commit_run`` query (worker/store/sql/pipeline.sql)."""
    inserts = [w for w in commit.writes if isinstance(w, InsertFact)]
    terms = [w.terms for w in inserts]
    held = [w for w in commit.writes if isinstance(w, HoldProposal)]
    holds = [w.row() for w in held]
    # Who each held addition is about, after the new facts' (memfleet_commit_run).
    additions = [(w.terms or PROFILE).person for w in held if w.target is None]
    position = {w.ref: i + 1 for i, w in enumerate(inserts)}  # 1-based, as in SQL
    targets: list[int | None] = []
    targets_new: list[int | None] = []
    successors: list[int | None] = []
    for write in commit.writes:
        if isinstance(write, HoldProposal):
            continue
        if isinstance(write, InsertFact):
            if write.supersedes is None:
                continue
            target, successor = write.supersedes, position[write.ref]
        else:
            target, successor = write.target, None
        if isinstance(target, ExistingRow):
            targets.append(target.id)
            targets_new.append(None)
        else:
            targets.append(None)
            targets_new.append(position[target.ref])
        successors.append(successor)
    return (
        flat_json(commit.cursor, fence_key=fence_key), commit.user_version,
        flat_json(commit.run, fence_key=fence_key),
        [w.text for w in inserts], [w.category for w in inserts],
        [w.importance for w in inserts],
        halfvec.encode_each([w.embedding for w in inserts]),
        commit.embedding_model, commit.observed_at, commit.source_session_id,
        targets, targets_new, successors,
        [t.scope for t in terms], [t.agent_id for t in terms],
        [t.valid_from for t in terms], [t.valid_to for t in terms],
        [t.expires_at for t in terms], [t.basis for t in terms],
        [t.confidence for t in terms], json.dumps(holds),
        persons_argument(commit, [*(t.person for t in terms), *additions]),
    )


def persons_argument(commit: RunCommit, about: list[PersonRef | None]) -> str | None:
    """memfleet_commit_persons' p_persons: the persons to create and relabel, and per
    new fact, then per held addition, the person it is about (``about``); None (all
    about the user, nothing to write) when persons are off or the run met no one."""
    writes = commit.persons
    if writes is None or (not writes.create and not writes.relabel
                          and all(p is None for p in about)):
        return None
    return json.dumps({
        "create": [label.row() for label in writes.create],
        "relabel": [{"person_id": r.person_id, **r.label.row()} for r in writes.relabel],
        "facts": [None if p is None else {"person_id": p.id} if isinstance(p, ExistingPerson)
                  else {"new": p.ref} for p in about],
    })
