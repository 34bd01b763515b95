"""The people in a user's life in plain Python, for InMemoryStore (docs/persons.md):
the pipeline's read of a user's persons and what a commit writes of them, as
schema/routines/memfleet_commit_persons.sql does. The memory API's changes of persons
(create, relabel, move, merge) are PostgreSQL's alone, tested against it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from worker.persons_rules import key
from worker.store.person_types import (
    ExistingPerson,
    PersonLabel,
    PersonRecord,
    PersonRef,
    PersonWrites,
)


@dataclass(slots=True)
class InMemoryPersons:
    # person id -> the person with its current label; labels' history is not kept here.
    person_rows: dict[int, PersonRecord] = field(default_factory=dict)
    _next_person: int = 1
    _next_label: int = 1

    async def known_persons(self, user_id: str) -> list[PersonRecord]:
        return await self.persons(user_id)

    async def persons(self, user_id: str, *, include_merged: bool = False
                      ) -> list[PersonRecord]:
        return [p for p in sorted(self.person_rows.values(), key=lambda p: p.id)
                if p.user_id == user_id and (include_merged or p.merged_into is None)]

    async def person(self, user_id: str, person_id: int) -> PersonRecord | None:
        person = self.person_rows.get(person_id)
        return person if person is not None and person.user_id == user_id else None

    def write_persons(self, user_id: str, writes: PersonWrites, about: list[PersonRef | None],
                      session_id: str | None, at: datetime) -> list[int | None]:
        """memfleet_commit_persons: the persons created and relabelled, and per new fact
        the person it is about (None: the user)."""
        created: list[int] = []
        for label in writes.create:
            same = [p for p in self.person_rows.values()
                    if p.user_id == user_id and p.merged_into is None
                    and (key(p.display_name) == key(label.display_name)
                         if label.display_name else
                         p.display_name is None and key(p.relation) == key(label.relation))]
            created.append(same[0].id if same else self._create(user_id, label, session_id, at))
        for relabel in writes.relabel:
            old = self.person_rows.get(relabel.person_id)
            if old is None or old.user_id != user_id or old.merged_into is not None:
                continue
            self.person_rows[old.id] = self._labelled(old, relabel.label, "conversation", at)
        return [None if ref is None
                else self._current(user_id, ref.id) if isinstance(ref, ExistingPerson)
                else created[ref.ref - 1] for ref in about]

    def erase_persons(self, user_id: str) -> int:
        gone = [i for i, p in self.person_rows.items() if p.user_id == user_id]
        for person_id in gone:
            del self.person_rows[person_id]
        return len(gone)

    def _current(self, user_id: str, person_id: int) -> int:
        person = self.person_rows[person_id]
        if person.user_id != user_id:
            raise ValueError("another user's person")  # the foreign key's refusal
        while person.merged_into is not None:
            person = self.person_rows[person.merged_into]
        return person.id

    def _create(self, user_id: str, label: PersonLabel, session_id: str | None,
                at: datetime) -> int:
        person_id, self._next_person = self._next_person, self._next_person + 1
        self.person_rows[person_id] = self._labelled(PersonRecord(
            id=person_id, user_id=user_id, display_name=None, relation=None, aliases=(),
            created_from="conversation", source_session_id=session_id, created_at=at,
            label_id=0, labelled_at=at, label_set_by="conversation"), label, "conversation", at)
        return person_id

    def _labelled(self, person: PersonRecord, label: PersonLabel, set_by: str,
                  at: datetime | None = None) -> PersonRecord:
        label_id, self._next_label = self._next_label, self._next_label + 1
        return replace(person, display_name=label.display_name, relation=label.relation,
                       aliases=label.aliases, label_id=label_id,
                       labelled_at=at or datetime.now(UTC), label_set_by=set_by)
