"""Who each candidate fact is about: the user, a person the user has, or a person met
for the first time (docs/persons.md). Pure.

Extraction names a person by name, relation or both (``Mention``); ``Attributor``
resolves the mentions of one run against the user's persons, in order:

- a name (or an alias) that one person answers to is that person; said with another
  relation than the one stored, the relation changed (a new label);
- no one of that name: the one nameless person of a relation a user has one of ("my
  wife", then "my wife Sarah") gets the name (a new label); else a new person;
- a relation alone: the one person of that relation; none: a new, nameless person;
- a rename the text tells ("Ana goes by Annie now", worker.pipeline.mentions): the one
  person called Ana is called Annie, with Ana an alias (a new label); a text that says
  nothing more is no fact (the label's versions keep the rename);
- several persons fit, or neither name nor relation is given ("he", "my friend" among
  several friends): ambiguous. The candidate is dropped: memfleet does not guess who
  it is about, and a fact about someone is never kept as the user's.

Before that, worker.pipeline.mentions reads extraction's "about" against the fact's
own text: the user is never one of their persons. A mention the text alone implies
(``Mention.known_only``) is a person only if one already answers to its name.

Persons met twice in one run are one new person. Names and relations are compared as
worker.persons_rules says (case, spacing, "mom" for "mother").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from worker import persons_rules as rules
from worker.persons_rules import MAX_PERSON_NAME_CHARS, MAX_RELATION_CHARS
from worker.pipeline.mentions import Mention, implied_mention, mention_in
from worker.store.person_types import (
    ExistingPerson,
    NewPerson,
    PersonLabel,
    PersonRecord,
    PersonRef,
    PersonWrites,
    Relabel,
)


class Ambiguous:
    """A mention no single person fits: its fact is nobody's."""


AMBIGUOUS = Ambiguous()
Attribution = PersonRef | None | Ambiguous  # None: the user


def _clean(text: str | None, limit: int) -> str | None:
    try:
        cleaned = rules.clean_label(text, limit)
    except ValueError:
        return None  # a model's odd label costs the label, not the fact
    return cleaned


@dataclass(slots=True)
class _Person:
    """A person as this run sees it: a stored one, or one it creates."""

    ref: PersonRef
    display_name: str | None
    relation: str | None
    aliases: tuple[str, ...] = ()
    changed: bool = False  # a stored person's label the run replaces


@dataclass(slots=True)
class Attributor:
    """Resolves one run's mentions against the user's persons (``persons``), keeping
    what the run must write: the persons it creates and the labels it replaces."""

    persons: Sequence[PersonRecord]
    _seen: list[_Person] = field(init=False)
    _created: list[_Person] = field(init=False)

    def __post_init__(self) -> None:
        self._seen = [_Person(ExistingPerson(p.id), p.display_name, p.relation, p.aliases)
                      for p in self.persons]
        self._created = []

    def resolve(self, mention: Mention | None) -> Attribution:
        if mention is None:
            return None
        name = _clean(mention.name, MAX_PERSON_NAME_CHARS)
        relation = _clean(mention.relation, MAX_RELATION_CHARS)
        if name is not None and rules.relation_key(name) in rules.SINGLE_RELATIONS \
                and relation is None:
            name, relation = None, name  # "about": {"name": "wife"}: a relation, not a name
        if name is None and relation is None:
            return AMBIGUOUS
        if mention.formerly is not None and name is not None:
            return self._renamed(name, mention, relation)
        if mention.known_only:  # "Leo is learning Japanese.": Leo's if a Leo is known
            named = rules.matching(self._seen, name)
            return self._seen[named[0]].ref if len(named) == 1 else None
        if name is not None:
            return self._by_name(name, relation)
        return self._by_relation(relation)

    def _by_name(self, name: str, relation: str | None) -> Attribution:
        named = [self._seen[i] for i in rules.matching(self._seen, name)]
        if relation is not None and len(named) > 1:
            named = [p for p in named
                     if rules.relation_key(p.relation) == rules.relation_key(relation)]
        if len(named) > 1:
            return AMBIGUOUS
        if named:
            person = named[0]
            if relation is not None and \
                    rules.relation_key(person.relation) != rules.relation_key(relation):
                person.relation, person.changed = relation, True  # "Mia is my wife now"
            return person.ref
        if relation is not None and rules.single(relation):
            nameless = [p for p in self._seen if p.display_name is None
                        and rules.relation_key(p.relation) == rules.relation_key(relation)]
            if len(nameless) == 1:  # "my wife", then "my wife Sarah"
                nameless[0].display_name, nameless[0].changed = name, True
                return nameless[0].ref
        return self._create(name, relation)

    def _renamed(self, name: str, mention: Mention, relation: str | None) -> Attribution:
        """"Ana goes by Annie now": the one person called Annie already (renamed by an
        earlier run, or an alias), else the one called Ana, whose name becomes Annie
        and Ana an alias. A rename names the person: one known by neither name is new,
        unless the text alone implied the rename (``known_only``)."""
        if rules.matching(self._seen, name):
            return self._by_name(name, relation) if not mention.known_only \
                else self.resolve(replace(mention, formerly=None))
        old = [self._seen[i] for i in rules.matching(self._seen, mention.formerly)]
        if relation is not None and len(old) > 1:
            old = [p for p in old
                   if rules.relation_key(p.relation) == rules.relation_key(relation)]
        if len(old) > 1:
            return AMBIGUOUS
        if not old:
            if mention.known_only:
                return None
            created = self._create(name, relation)
            self._seen[-1].aliases = rules.bounded_aliases(name, (mention.formerly or "",))
            return created
        person = old[0]
        before = [person.display_name] if person.display_name else []
        person.aliases = rules.bounded_aliases(name, (*person.aliases, *before))
        person.display_name, person.changed = name, True
        if relation is not None and not person.relation:
            person.relation = relation
        return person.ref

    def _by_relation(self, relation: str | None) -> Attribution:
        wanted = rules.relation_key(relation)
        fits = [p for p in self._seen if rules.relation_key(p.relation) == wanted
                or (wanted and wanted in rules.names_of(p))]
        if len(fits) > 1:
            return AMBIGUOUS
        if fits:
            return fits[0].ref
        return self._create(None, relation)

    def _create(self, name: str | None, relation: str | None) -> NewPerson:
        person = _Person(NewPerson(len(self._created) + 1), name, relation)
        self._created.append(person)
        self._seen.append(person)
        assert isinstance(person.ref, NewPerson)
        return person.ref

    def writes(self) -> PersonWrites:
        """What the run writes of persons: the new ones, in their ``NewPerson`` order,
        and the stored ones whose label it replaces."""
        relabel = tuple(
            Relabel(p.ref.id, PersonLabel(p.display_name, p.relation, p.aliases))
            for p in self._seen if p.changed and isinstance(p.ref, ExistingPerson))
        create = tuple(PersonLabel(p.display_name, p.relation, p.aliases)
                       for p in self._created)
        return PersonWrites(create, relabel)


__all__ = ["AMBIGUOUS", "Attributed", "Attributor", "Mention", "attribute", "implied_mention",
           "mention_in"]


@dataclass(frozen=True, slots=True)
class Attributed:
    """One run's candidates with who each is about: ``kept``, the positions of the
    candidates kept (the ambiguous are not), and what the run writes of persons."""

    kept: tuple[int, ...]
    about: tuple[PersonRef | None, ...]  # per kept candidate
    writes: PersonWrites
    dropped: int  # ambiguous: nobody's
    renamed: int = 0  # a rename and nothing more: the label keeps it, no fact does


def attribute(persons: Sequence[PersonRecord],
              mentions: Sequence[Mention | None]) -> Attributed:
    """Resolve every mention, in order (a person met twice in the run is one)."""
    attributor = Attributor(persons)
    # A rename first: "Annie got a puppy" beside "Ana goes by Annie now" is Ana's.
    order = sorted(range(len(mentions)),
                   key=lambda i: (getattr(mentions[i], "formerly", None) is None, i))
    found = {i: attributor.resolve(mentions[i]) for i in order}
    kept: list[int] = []
    about: list[PersonRef | None] = []
    dropped = renamed = 0
    for i, mention in enumerate(mentions):
        attribution = found[i]
        if isinstance(attribution, Ambiguous):
            dropped += 1
        elif attribution is not None and mention is not None and mention.rename_only:
            renamed += 1
        else:
            kept.append(i)
            about.append(attribution)
    return Attributed(tuple(kept), tuple(about), attributor.writes(), dropped, renamed)
