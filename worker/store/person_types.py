"""The store's vocabulary for the people in a user's life (docs/persons.md).

A fact is about the user or about one of the user's persons. A person has an id
that never changes and a current label (display name, relation, aliases) whose
earlier versions stay as history. The pipeline names the persons of a commit by
``PersonRef``: one already stored, or one the commit creates.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

PersonOrigin = Literal["conversation", "user"]


@dataclass(frozen=True, slots=True)
class ExistingPerson:
    """A person of the user already stored."""

    id: int


@dataclass(frozen=True, slots=True)
class NewPerson:
    """A person the commit creates: its 1-based position in ``PersonWrites.create``."""

    ref: int


PersonRef = ExistingPerson | NewPerson


@dataclass(frozen=True, slots=True)
class PersonLabel:
    """What a person is called. A label has a name, a relation, or both."""

    display_name: str | None
    relation: str | None
    aliases: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        """How the person is named to a reader: the name, else the relation."""
        return self.display_name or self.relation or ""

    def row(self) -> dict[str, Any]:
        return {"display_name": self.display_name, "relation": self.relation,
                "aliases": list(self.aliases)}


@dataclass(frozen=True, slots=True)
class Relabel:
    """A new current label for a stored person (a name learned, a relation changed)."""

    person_id: int
    label: PersonLabel


@dataclass(frozen=True, slots=True)
class PersonWrites:
    """The persons part of a run's commit: persons to create, labels to replace."""

    create: tuple[PersonLabel, ...] = ()
    relabel: tuple[Relabel, ...] = ()


NO_PERSON_WRITES = PersonWrites()


@dataclass(frozen=True, slots=True)
class PersonRecord:
    """A person of the user with the current label."""

    id: int
    user_id: str
    display_name: str | None
    relation: str | None
    aliases: tuple[str, ...]
    created_from: str
    source_session_id: str | None
    created_at: datetime
    label_id: int
    labelled_at: datetime
    label_set_by: str
    merged_into: int | None = None
    merged_at: datetime | None = None

    @property
    def label(self) -> PersonLabel:
        return PersonLabel(self.display_name, self.relation, self.aliases)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "display_name": self.display_name, "relation": self.relation,
            "aliases": list(self.aliases), "created_from": self.created_from,
            "source_session_id": self.source_session_id,
            "created_at": self.created_at.isoformat(),
            "labelled_at": self.labelled_at.isoformat(), "label_set_by": self.label_set_by,
            "merged_into": self.merged_into,
            "merged_at": self.merged_at.isoformat() if self.merged_at else None,
        }


# What became of a user's change of a person or of a fact's person: done; no such
# person (or fact) of the user; a fact no longer active; a person merged already.
PersonStatus = Literal["done", "missing", "inactive", "merged", "same"]
