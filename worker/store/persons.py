"""The people in a user's life on PostgreSQL (docs/persons.md): the pipeline's read of
the user's persons, and the user's own changes through the memory API (create,
relabel, move a fact, merge).

Each change is one transaction under the user-version compare-and-set
(worker.store.versioned), like every write of the user's facts: a consolidation
that read the user's facts or persons before it re-reads. Nothing is deleted: a
relabel is a new label version, a move is a new version of the fact, a merge a link
from one person to the other. Every statement names the user (persons.sql).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worker.persons_rules import merged_aliases
from worker.store import queries
from worker.store.person_types import PersonLabel, PersonOrigin, PersonRecord, PersonStatus
from worker.store.translate import translated
from worker.store.types import ConsentGate, FactRecord
from worker.store.versioned import RowMissing, VersionedWrites, fact_of

# The most facts about persons one read returns (a prompt's section is smaller).
MAX_PERSON_FACTS = 10_000


def _sql(name: str) -> str:
    return queries.load("persons")[name]


def person_of(row: Any) -> PersonRecord:
    return PersonRecord(
        id=row["id"], user_id=row["user_id"], display_name=row["display_name"],
        relation=row["relation"], aliases=tuple(row["aliases"] or ()),
        created_from=row["created_from"], source_session_id=row["source_session_id"],
        created_at=row["created_at"], label_id=row["label_id"],
        labelled_at=row["labelled_at"], label_set_by=row["label_set_by"],
        merged_into=row["merged_into"], merged_at=row["merged_at"])


class _Refused(Exception):
    """A change that cannot be done: rolls its transaction back."""

    def __init__(self, status: PersonStatus) -> None:
        super().__init__(status)
        self.status = status


async def _relabel(conn: Any, user_id: str, person_id: int, label: PersonLabel,
                   set_by: str) -> None:
    """End the person's current label and write ``label`` as the next one."""
    old = await conn.fetchval(_sql("end_label"), user_id, person_id)
    new = await conn.fetchval(_sql("insert_label"), user_id, person_id, label.display_name,
                              label.relation, list(label.aliases), set_by)
    if old is not None:
        await conn.execute(_sql("link_label"), user_id, old, new)


async def _move(conn: Any, user_id: str, fact_ids: Sequence[int],
                person_id: int | None) -> list[FactRecord]:
    rows = await conn.fetch(_sql("move_facts"), user_id, list(fact_ids), person_id)
    return [fact_of(row) for row in rows]


class PostgresPersons(VersionedWrites):
    """worker.store.base.PersonStore on PostgreSQL (a base of PostgresStore)."""

    async def known_persons(self, user_id: str) -> list[PersonRecord]:
        return await self.persons(user_id)

    async def persons(self, user_id: str, *, include_merged: bool = False
                      ) -> list[PersonRecord]:
        async with translated("reading persons"):
            rows = await self._pool.fetch(_sql("persons"), user_id, include_merged)
        return [person_of(row) for row in rows]

    async def person(self, user_id: str, person_id: int) -> PersonRecord | None:
        async with translated("reading a person"):
            row = await self._pool.fetchrow(_sql("person"), user_id, person_id)
        return None if row is None else person_of(row)

    async def person_facts(
        self, user_id: str, *, person_id: int | None = None, limit: int = MAX_PERSON_FACTS,
        consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        if limit < 1:
            return []
        gate = None if consent_gate is None else consent_gate.memory_default
        async with translated("reading facts about persons"):
            rows = await self._pool.fetch(_sql("person_facts"), user_id, person_id, gate,
                                          limit)
        return [fact_of(row) for row in rows]

    async def create_person(self, user_id: str, label: PersonLabel,
                            origin: PersonOrigin = "user") -> PersonRecord:
        async def write(conn: Any) -> PersonRecord:
            person_id = await conn.fetchval(_sql("insert_person"), user_id, origin)
            await _relabel(conn, user_id, person_id, label, "user")
            return person_of(await conn.fetchrow(_sql("person"), user_id, person_id))

        created = await self._versioned("creating a person", user_id, write)
        assert created is not None  # an insert always returns its row
        return created

    async def relabel_person(self, user_id: str, person_id: int, label: PersonLabel
                             ) -> tuple[PersonStatus, PersonRecord | None]:
        """The person's new label, by the user: ("done", the person), ("missing", None)
        or ("merged", the person as it is: its label is the merged one's no more)."""

        async def write(conn: Any) -> PersonRecord:
            await _locked(conn, user_id, person_id)
            await _relabel(conn, user_id, person_id, label, "user")
            return person_of(await conn.fetchrow(_sql("person"), user_id, person_id))

        return await self._person_change("relabelling a person", user_id, write)

    async def move_fact(self, user_id: str, fact_id: int, person_id: int | None
                        ) -> tuple[PersonStatus, FactRecord | None]:
        """A new version of the active fact about ``person_id`` (None: the user), in its
        chain: ("done", the new version), ("missing", None) for no such fact or person,
        ("inactive", None), ("merged", None) for a person merged into another, or
        ("same", the fact) when it is about that person already (nothing written)."""

        async def write(conn: Any) -> FactRecord:
            row = await conn.fetchrow(_sql("lock_fact"), user_id, fact_id)
            if row is None:
                exists = await conn.fetchval(queries.load("memory_api")["get_fact"], user_id,
                                             fact_id)
                raise _Refused("missing" if exists is None else "inactive")
            if person_id is not None:
                await _locked(conn, user_id, person_id)
            if row["person_id"] == person_id:
                raise _Refused("same")
            return (await _move(conn, user_id, [fact_id], person_id))[0]

        status, fact = await self._person_change("moving a fact", user_id, write)
        if status == "same":
            async with translated("reading a fact"):
                row = await self._pool.fetchrow(queries.load("memory_api")["get_fact"],
                                                user_id, fact_id)
            fact = None if row is None else fact_of(row)
        return status, fact

    async def merge_persons(self, user_id: str, source_id: int, target_id: int
                            ) -> tuple[PersonStatus, PersonRecord | None]:
        """``source_id`` merged into ``target_id``: its active facts move to the target
        (new versions), so do its open held additions, its names become the target's
        aliases (a new label), and it links to the target. ("done", the target),
        ("missing", None), ("merged", None) when either is merged already, ("same",
        None) for one person twice."""
        if source_id == target_id:
            return "same", None

        async def write(conn: Any) -> PersonRecord:
            # Locked in id order, so two merges of the same pair cannot deadlock.
            for person_id in sorted((source_id, target_id)):
                await _locked(conn, user_id, person_id)
            source = person_of(await conn.fetchrow(_sql("person"), user_id, source_id))
            target = person_of(await conn.fetchrow(_sql("person"), user_id, target_id))
            ids = [r["id"] for r in await conn.fetch(_sql("active_fact_ids"), user_id,
                                                    source_id)]
            if ids:
                await _move(conn, user_id, ids, target_id)
            await conn.execute(_sql("move_held"), user_id, source_id, target_id)
            await conn.execute(_sql("mark_merged"), user_id, source_id, target_id)
            await _relabel(conn, user_id, target_id, merged_label(target.label, source.label),
                           "merge")
            return person_of(await conn.fetchrow(_sql("person"), user_id, target_id))

        return await self._person_change("merging persons", user_id, write)

    async def _person_change(self, what: str, user_id: str, write: Any
                             ) -> tuple[PersonStatus, Any]:
        try:
            done = await self._versioned(what, user_id, write)
        except _Refused as refused:
            return refused.status, None
        return ("done", done) if done is not None else ("missing", None)


async def _locked(conn: Any, user_id: str, person_id: int) -> None:
    row = await conn.fetchrow(_sql("lock_person"), user_id, person_id)
    if row is None:
        raise RowMissing
    if row["merged_into"] is not None:
        raise _Refused("merged")


def merged_label(target: PersonLabel, source: PersonLabel) -> PersonLabel:
    """The target's label after a merge: its own name and relation (the source's where it
    has none), and the source's names among its aliases, so a later mention of either
    finds the one person (worker.pipeline.attribution)."""
    return PersonLabel(target.display_name or source.display_name,
                       target.relation or source.relation,
                       merged_aliases(target, source))
