"""The people in a user's life (docs/persons.md) over the memory API, as Calls, and
their answers: list a user's persons with their facts, make one, rename or relabel
one, add an alias, merge two, and say who a fact is about.

    for person in api.persons("ada"):
        print(person.display_name, person.relation, [f.text for f in person.facts])
    api.move_fact("ada", fact_id, person_id=None)  # it was about the user after all
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from worker.client.memory_api_models import Fact, _int, _list, _obj, _opt, _str, _time
from worker.client.memory_api_wire import Call, segment


@dataclass(frozen=True, slots=True)
class Person:
    """A person of the user's life with the current label and, listed, their facts."""

    id: int
    display_name: str | None
    relation: str | None
    aliases: list[str]
    created_from: str  # conversation | user
    source_session_id: str | None
    created_at: datetime
    labelled_at: datetime
    label_set_by: str  # conversation | user | merge
    merged_into: int | None
    merged_at: datetime | None
    facts: list[Fact] = field(default_factory=list)

    @classmethod
    def parse(cls, value: Any) -> Person:
        d = _obj(value)
        return cls(
            id=_int(d["id"]), display_name=_opt(_str, d.get("display_name")),
            relation=_opt(_str, d.get("relation")),
            aliases=[_str(a) for a in _list(d.get("aliases", []))],
            created_from=_str(d["created_from"]),
            source_session_id=_opt(_str, d.get("source_session_id")),
            created_at=_time(d["created_at"]), labelled_at=_time(d["labelled_at"]),
            label_set_by=_str(d["label_set_by"]), merged_into=_opt(_int, d.get("merged_into")),
            merged_at=_opt(_time, d.get("merged_at")),
            facts=[Fact.parse(f) for f in _list(d.get("facts", []))])


def _persons(user_id: str) -> str:
    return f"/users/{segment(user_id, 'user_id')}/persons"


def persons(user_id: str, include_merged: bool) -> Call[list[Person]]:
    return Call("persons", "GET", _persons(user_id),
                lambda r: [Person.parse(p) for p in _list(_obj(r.json())["persons"])],
                params={"include_merged": "true"} if include_merged else None)


def create_person(user_id: str, display_name: str | None, relation: str | None,
                  aliases: list[str] | None) -> Call[Person]:
    return Call("create_person", "POST", _persons(user_id), lambda r: Person.parse(r.json()),
                body={"display_name": display_name, "relation": relation,
                      "aliases": list(aliases or [])})


def update_person(user_id: str, person_id: int, changes: dict[str, Any]) -> Call[Person]:
    """``changes``: a merge patch (display_name, relation, aliases; null clears)."""
    return Call("update_person", "PATCH", f"{_persons(user_id)}/{int(person_id)}",
                lambda r: Person.parse(r.json()), body=changes)


def add_alias(user_id: str, person_id: int, alias: str) -> Call[Person]:
    return Call("add_alias", "POST", f"{_persons(user_id)}/{int(person_id)}/aliases",
                lambda r: Person.parse(r.json()), body={"alias": alias})


def merge_persons(user_id: str, person_id: int, into: int) -> Call[Person]:
    return Call("merge_persons", "POST", f"{_persons(user_id)}/{int(person_id)}/merge",
                lambda r: Person.parse(r.json()), body={"into": int(into)})


def move_fact(user_id: str, fact_id: int, person_id: int | None) -> Call[Fact]:
    return Call("move_fact", "PUT",
                f"/users/{segment(user_id, 'user_id')}/facts/{int(fact_id)}/person",
                lambda r: Fact.parse(r.json()), body={"person_id": person_id})
