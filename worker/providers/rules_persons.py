"""The offline rules provider's reading of facts about the people in a user's life
(docs/persons.md), used while the extraction request carries "people".

A clause about another person becomes that person's fact, never the user's:

- "my sister Ana is vegetarian", "my boss Tom moved to Berlin": about Ana (sister),
  Tom (boss);
- "my wife is allergic to nuts": about the wife, not yet named;
- "my wife's name is Sarah", "my wife is called Sarah" stay the user's relationship
  facts, as before persons (who the user's partner is, and its changes, are the
  user's); a name said with the relation ("my wife Sarah ...") names the person;
- "Mia is my wife now": about Mia, whose relation is wife;
- "Ana is a pilot", for an Ana that "people" lists: about her;
- "she works as a dentist", after one person in the same message: about that person.
  After none or several (who "he" is cannot be told), the clause is dropped: it is
  nobody's fact, and not the user's.

Reported speech ("my friend Tom said 'I'm allergic to cats'") states nothing about
anyone and is dropped whole, so the quote never becomes the user's. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from worker.persons_rules import PERSON_RELATIONS, key, names_of
from worker.providers.wire import AboutPerson, ExtractedFact, KnownPerson

_REL = "|".join(re.escape(r) for r in PERSON_RELATIONS)
_NAME = r"(?-i:[A-ZÀ-ÖØ-Þ][\w'-]{0,39})"
_START = r"^(?:(?:and|but|so|also|oh|well|yes|yeah|ok|okay)\s+)?"
# What a clause about someone goes on with: a verb (or "is", "has"...). Reported
# speech (said, told, thinks) is not in it: a quote states nothing.
_VERBS = (
    r"is|was|has|had|isn't|wasn't|hasn't|works|worked|lives|lived|loves|loved|likes|liked|"
    r"hates|hated|moved|started|got|gets|plays|played|runs|ran|teaches|taught|studies|"
    r"studied|can't|cannot|can|doesn't|does|won't|will|just|recently|now|still|also|"
    r"speaks|drinks|eats|owns|drives|prefers|enjoys|uses|used|became|goes|went|retired|"
    r"quit|left|joined|visits|visited|needs|wants|collects|bakes|cooks|paints|writes|"
    r"changed|calls"
)
_REST = rf"(?P<rest>(?:{_VERBS})\b.{{1,300}})"
_FLAGS = re.IGNORECASE

# "my wife's name is Sarah", "my wife is called Sarah", "my wife is Sarah"
_NAMING = re.compile(
    _START + rf"my\s+(?P<rel>{_REL})(?:'s\s+name\s+is|\s+is\s+(?:named|called)|\s+is)\s+"
    rf"(?P<name>{_NAME})$", _FLAGS)
# "Mia is my wife now", "Tom is now my boss"
_BECAME = re.compile(
    _START + rf"(?P<name>{_NAME})\s+is\s+(?:now\s+)?my\s+(?P<rel>{_REL})(?:\s+now)?$", _FLAGS)
# "my sister Ana is vegetarian", "my boss, Tom, moved to Berlin"
_NAMED = re.compile(
    _START + rf"my\s+(?P<rel>{_REL}),?\s+(?P<name>{_NAME}),?\s+" + _REST + "$", _FLAGS)
# "my wife is allergic to nuts"
_UNNAMED = re.compile(_START + rf"my\s+(?P<rel>{_REL})\s+" + _REST + "$", _FLAGS)
# "she works as a dentist"
_PRONOUN = re.compile(_START + r"(?P<pronoun>he|she|they)\s+" + _REST + "$", _FLAGS)
# "Ana is a pilot" (a known name only)
_KNOWN = re.compile(_START + rf"(?P<name>{_NAME})\s+" + _REST + "$", _FLAGS)
# Reported speech about someone: nothing in it is anybody's fact.
_REPORTED = re.compile(
    _START + rf"(?:my\s+(?:{_REL})(?:,?\s+{_NAME})?|(?!I\b){_NAME}|he|she|they)\s+"
    r"(?:said|says|told|tells|asked|asks|thinks|thought|claims|claimed|wrote|writes)\b",
    _FLAGS)


@dataclass(frozen=True, slots=True)
class PersonClause:
    """What a clause said about someone: the fact (None: nothing to keep), and who it
    was about (None: nobody the rules could tell)."""

    fact: ExtractedFact | None
    about: AboutPerson | None


def _relation(word: str) -> str:
    return word.casefold()


def _said(rest: str) -> str:
    return rest.strip().rstrip(".!;,")


def _fact(text: str, about: AboutPerson, importance: int = 6) -> ExtractedFact:
    return ExtractedFact(text=text[:1000], category="relationship", importance=importance,
                         about=about)


def _known(name: str, people: Sequence[KnownPerson]) -> AboutPerson | None:
    """The person of ``people`` that ``name`` names, as they are listed."""
    wanted = key(name)
    found = [p for p in people if wanted in names_of(_Named(p))]
    if len(found) != 1:
        return None
    return AboutPerson(name=found[0].name or name, relation=found[0].relation)


@dataclass(frozen=True, slots=True)
class _Named:
    person: KnownPerson

    @property
    def display_name(self) -> str | None:
        return self.person.name

    @property
    def relation(self) -> str | None:
        return self.person.relation

    @property
    def aliases(self) -> tuple[str, ...]:
        return self.person.aliases


def person_clause(clause: str, people: Sequence[KnownPerson],
                  previous: AboutPerson | None, mentioned: int) -> PersonClause | None:
    """The clause read as being about someone else, or None when it is not (the user
    rules then read it). ``previous``: the person the message last spoke of, and
    ``mentioned`` how many it spoke of so far (a pronoun is only read after exactly
    one)."""
    clause = clause.strip()
    if _REPORTED.match(clause):
        return PersonClause(None, None)
    if _NAMING.match(clause) is not None:
        return None  # who the user's partner is: the user's relationship fact, as before
    if (match := _BECAME.match(clause)) is not None:
        rel, name = _relation(match["rel"]), match["name"]
        about = AboutPerson(name=name, relation=rel)
        return PersonClause(_fact(f"{name} is the user's {rel}", about, 8), about)
    if (match := _NAMED.match(clause)) is not None:
        rel, name = _relation(match["rel"]), match["name"]
        about = AboutPerson(name=name, relation=rel)
        return PersonClause(_fact(f"The user's {rel} {name} {_said(match['rest'])}", about),
                            about)
    if (match := _UNNAMED.match(clause)) is not None:
        rel = _relation(match["rel"])
        about = AboutPerson(name=None, relation=rel)
        return PersonClause(_fact(f"The user's {rel} {_said(match['rest'])}", about), about)
    if (match := _PRONOUN.match(clause)) is not None:
        if previous is None or mentioned != 1:
            return PersonClause(None, None)  # who is meant cannot be told: nobody's fact
        who = previous.name or f"The user's {previous.relation}"
        return PersonClause(_fact(f"{who} {_said(match['rest'])}", previous), previous)
    if people and (match := _KNOWN.match(clause)) is not None:
        listed = _known(match["name"], people)
        if listed is not None:
            return PersonClause(_fact(f"{match['name']} {_said(match['rest'])}", listed),
                                listed)
    return None


class MessagePeople:
    """Who one message has spoken of so far, for its pronouns."""

    def __init__(self, people: Sequence[KnownPerson]) -> None:
        self.people = people
        self._last: AboutPerson | None = None
        self._seen: set[str] = set()

    def read(self, clause: str) -> PersonClause | None:
        found = person_clause(clause, self.people, self._last, len(self._seen))
        if found is not None and found.about is not None:
            self._last = found.about
            self._seen.add(key(found.about.name) or "~" + key(found.about.relation))
        return found
