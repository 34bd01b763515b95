"""Request and response bodies of the people in a user's life (worker.api.persons_routes;
docs/persons.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from worker.api.memory_models import MAX_FACT_ID, Fact
from worker.persons_rules import (
    MAX_ALIASES,
    MAX_PERSON_NAME_CHARS,
    MAX_RELATION_CHARS,
    bounded_aliases,
    clean_label,
)
from worker.store.person_types import PersonLabel, PersonRecord


def _name(value: str | None) -> str | None:
    return clean_label(value, MAX_PERSON_NAME_CHARS)


def _relation(value: str | None) -> str | None:
    return clean_label(value, MAX_RELATION_CHARS)


def _alias(value: str) -> str:
    cleaned = clean_label(value, MAX_PERSON_NAME_CHARS)
    if cleaned is None:
        raise ValueError("an alias is blank")
    return cleaned


Name = Annotated[str | None, AfterValidator(_name)]
Relation = Annotated[str | None, AfterValidator(_relation)]
Alias = Annotated[str, AfterValidator(_alias)]


class Person(BaseModel):
    id: int
    display_name: str | None = Field(description="Null until a name is known ('my wife').")
    relation: str | None = Field(description="To the user: 'sister', 'wife', 'boss'.")
    aliases: list[str]
    created_from: Literal["conversation", "user"]
    source_session_id: str | None
    created_at: datetime
    labelled_at: datetime = Field(description="When the current name, relation and aliases "
                                              "were set.")
    label_set_by: Literal["conversation", "user", "merge"]
    merged_into: int | None = Field(description="Merged into that person: its facts are "
                                                "theirs now.")
    merged_at: datetime | None

    @classmethod
    def of(cls, record: PersonRecord) -> Person:
        return cls.model_validate(record.to_json())


class PersonWithFacts(Person):
    facts: list[Fact] = Field(description="Active facts about the person, pinned first, then "
                                          "by importance.")


class Persons(BaseModel):
    user_id: str
    persons: list[PersonWithFacts] = Field(description="By id.")


class PersonBody(BaseModel):
    """A person made by the user: a name, a relation, or both."""

    model_config = ConfigDict(extra="forbid")

    display_name: Name = None
    relation: Relation = None
    aliases: list[Alias] = Field(default_factory=list, max_length=MAX_ALIASES)

    @model_validator(mode="after")
    def _named(self) -> PersonBody:
        if self.display_name is None and self.relation is None:
            raise ValueError("a person needs a display_name or a relation")
        return self

    def label(self) -> PersonLabel:
        return PersonLabel(self.display_name, self.relation,
                           bounded_aliases(self.display_name, self.aliases))


class PersonPatch(BaseModel):
    """A merge patch of the person's label (RFC 7396): a member left out keeps the
    current value; display_name or relation set to null is cleared (one must remain).
    The old label stays in the person's history."""

    model_config = ConfigDict(extra="forbid")

    display_name: Name = None
    relation: Relation = None
    aliases: list[Alias] | None = Field(default=None, max_length=MAX_ALIASES)

    def applied(self, current: PersonLabel) -> PersonLabel:
        given = self.model_fields_set
        name = self.display_name if "display_name" in given else current.display_name
        relation = self.relation if "relation" in given else current.relation
        aliases = (self.aliases or []) if "aliases" in given else list(current.aliases)
        if name is None and relation is None:
            raise ValueError("a person needs a display_name or a relation")
        return PersonLabel(name, relation, bounded_aliases(name, aliases))


class AliasBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alias: Alias


class MergeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    into: int = Field(ge=1, le=MAX_FACT_ID,
                      description="The person that stays; this one is merged into it.")


class FactPersonBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    person_id: int | None = Field(ge=1, le=MAX_FACT_ID,
                                  description="The person the fact is about; null: the user.")
