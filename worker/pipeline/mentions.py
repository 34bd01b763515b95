"""Who a fact is about, read from extraction's answer: its "about" (a name, a relation)
checked against the fact's own text, which is what is stored and read (docs/persons.md).
Pure; worker.pipeline.attribution then resolves each ``Mention`` against the user's
persons.

A small model's "about" is often wrong where its text is right, and the other way
round. Seen on the 1.5B model (docs/persons.md, "On a real model"): the user under
their own name with the relation "self"; "The user is allergic to cats." about the
friend who is; the relation copied from the request's "people" while the text says
it changed ("The user's wife Mia ..." about {"Mia", "girlfriend"}); "The user's wife"
as a name; null for "The user's sister works as a dentist." beside the sister's
other fact; null for "Leo is learning Japanese." with Leo known.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from worker import persons_rules as rules


@dataclass(frozen=True, slots=True)
class Mention:
    """Who extraction said a fact is about (neither: it could not tell).
    ``known_only``: implied by the text alone, so a person only if one already
    answers to the name; else the fact stays the user's."""

    name: str | None
    relation: str | None
    known_only: bool = False
    # The name the person had before, where the text says they are called ``name`` now
    # ("Ana goes by Annie now"): the person who answers to it is renamed.
    formerly: str | None = None
    # The text says nothing but the rename ("Kai changed his name to Kian last
    # month."): the person's label keeps it, so it is no fact of its own.
    rename_only: bool = False


# Both apostrophes a model writes (ASCII and U+2019).
_APOSTROPHE = "['\u2019]"
_RELATION = "(?P<relation>" + "|".join(re.escape(r) for r in rules.PERSON_RELATIONS) + ")"
_NAME = r"(?-i:[A-Z][\w'-]*)"
# A fact with the user as its subject, in the languages the extraction prompt names
# ("The user lives in Leeds"; not "The user's sister ...").
_USER_SUBJECT = re.compile(
    r"^(?:the user|der nutzer|die nutzerin|el usuario|la usuaria|l" + _APOSTROPHE
    + r"utilisat(?:eur|rice))\s", re.IGNORECASE)
# "The user's sister (Ana) ...": a fact about the user's relation, as the extraction
# prompt writes one; unless it only names the relation ("The user's partner is Alex",
# "... is called Alex", "The user's wife's name is Sarah"): who the user's partner is
# stays the user's relationship fact (docs/persons.md).
_RELATION_SUBJECT = re.compile(
    r"^the user" + _APOSTROPHE + r"s " + _RELATION + r"(?=[ ,.]|" + _APOSTROPHE
    + r"|$)(?:,? (?P<name>" + _NAME + r")(?=[ ,.]),?)?(?P<rest>.*)$", re.IGNORECASE)
_NAMING = re.compile(
    r"^(?:" + _APOSTROPHE + r"s name\b| (?:is )?(?:named|called)\b"
    r"| is (?-i:[A-Z])[\w'-]*\.?$)", re.IGNORECASE)
# A fact whose subject is a name ("Leo is learning Japanese."), not a sentence's
# usual capitals.
_NAME_SUBJECT = re.compile(r"^(?P<name>" + _NAME + r")(?:" + _APOSTROPHE + r"s)? ")
_NOT_NAMES = frozenset({"the", "a", "an", "this", "that", "these", "those", "it", "he",
                        "she", "they", "his", "her", "their", "its", "there", "user",
                        "der", "die", "das", "el", "la", "los", "las", "le", "les", "l"})
# Ways a text says what a named person is to the user: "The user's wife Mia",
# "Mia is (now) the user's wife", "The user's boss is (now) Nora".
_RELATION_OF = (
    "user" + _APOSTROPHE + "s " + _RELATION + r",? {name}\b",
    r"\b{name} is (?:now )?(?:the user" + _APOSTROPHE + "s|their|my) " + _RELATION + r"\b",
    "user" + _APOSTROPHE + "s " + _RELATION + r" is (?:now )?{name}\b",
)
# A text telling that someone is called otherwise now ("Ana goes by Annie now", "Kai
# changed his name to Kian", "Elizabeth wants everyone to call her Liz"): the old name
# (or a pronoun, then "about" names them) and the new one.
_WHO = r"(?P<old>" + _NAME + r")(?:,| now| has)*"
_RENAMED = tuple(re.compile(r"\b" + _WHO + pattern + r"(?P<new>" + _NAME + r")") for pattern in (
    r" (?:goes|is going) by (?:the name (?:of )?)?",
    r" (?:changed|legally changed) (?:his|her|their) (?:first )?name to ",
    r" (?:is|was) (?:now )?(?:called|named|known as|renamed) (?=(?-i:[A-Z])\w*(?: now|,|\.|$))",
    r" is now (?=(?-i:[A-Z])\w*(?:,|\.|$))",  # "The user's sister Ana is now Annie." (1.5B)
    r" (?:prefers|wants|likes|asks) (?:to be called|(?:everyone|people|others|us|me|the "
    r"user|friends) to call (?:him|her|them)(?:self|selves)?) ",
    r" calls (?:himself|herself|themselves|themself) ",
    _APOSTROPHE + r"s (?:new )?name is now ",
    _APOSTROPHE + r"s new name is ",
))
_PRONOUNS = frozenset({"he", "she", "they", "him", "her", "them"})
# What a rename's text may say beside it and still say nothing more: who (the user's
# relation), when ("now", "last month").
_RENAME_FILLER = frozenset({
    "the", "user's", "users", "user", "now", "just", "recently", "officially", "legally",
    "last", "this", "month", "week", "year", "ago", "today", "yesterday", "a", "few",
    "days", "weeks", "months", "years", "since", "then", "everyone", "his", "her", "their"})
_WORD = re.compile(r"[\w'\u2019]+")


# What a model writes as a name when there is none: "The user's wife", "my wife".
_NO_NAME_PREFIX = re.compile(r"^(?:the user" + _APOSTROPHE + r"s|user" + _APOSTROPHE
                             + r"s|my|their) ", re.IGNORECASE)


def mention_in(text: str, name: str | None, relation: str | None) -> Mention | None:
    """Who a fact is about: extraction's "about" (``name``, ``relation``) as its own
    text allows; None for the user.

    A self relation is the user (then the text alone says). A fact whose subject is
    the user ("The user is allergic to cats.") that names neither the person nor the
    relation is nobody's (``Mention(None, None)``: dropped): the text or "about" is
    wrong, and guessing the text would make a friend's allergy the user's. A name
    that is only the relation ("Sister", "The user's wife") is no name. Where the text
    says what the named person is to the user, its relation wins over the one "about"
    copied.
    """
    if rules.is_self(relation):
        return implied_mention(text)
    if _USER_SUBJECT.match(text) and not _names(text, name, relation):
        return Mention(None, None)  # which of the two is wrong is not known: nobody's
    name = _real_name(name)
    renamed = renaming(text, name)
    if renamed is not None:
        old, new, only = renamed
        return Mention(new, _relation_of(text, old) or _relation_of(text, new) or relation,
                       formerly=old, rename_only=only)
    if name is not None:
        relation = _relation_of(text, name) or relation
    return Mention(name, relation)


class Renaming(NamedTuple):
    old: str
    new: str
    only: bool  # the text says nothing else: no fact of its own


def renaming(text: str, name: str | None = None) -> Renaming | None:
    """The old and the new name where ``text`` tells that someone is called otherwise
    now, and whether it says nothing else; a pronoun for the old name is ``name``
    (extraction's "about"), else no renaming."""
    for pattern in _RENAMED:
        found = pattern.search(text)
        if found is None:
            continue
        old, new = found["old"], found["new"]
        if rules.key(old) in _PRONOUNS:
            old = name or ""
        if rules.key(old) in _NOT_NAMES or rules.key(new) in _NOT_NAMES \
                or not rules.key(old) or rules.key(old) == rules.key(new):
            return None
        rest = f"{text[:found.start()]} {text[found.end():]}".casefold()
        relations = {rules.key(r) for r in rules.PERSON_RELATIONS}
        only = all(w in _RENAME_FILLER or w in relations
                   for w in _WORD.findall(rest.replace("\u2019", "'")))
        return Renaming(old, new, only)
    return None


def implied_mention(text: str) -> Mention | None:
    """Who a fact extraction said is the user's is about, by its text: one written
    about the user's relation ("The user's sister works as a dentist.") is that
    relation's; one whose subject is a name ("Leo is learning Japanese.") is that
    person's if they are known (``known_only``); any other, the user's."""
    text = text.strip()
    renamed = renaming(text)
    if renamed is not None:  # "Ana goes by Annie now.": hers if she is known
        old, new, only = renamed
        return Mention(new, _relation_of(text, old), known_only=True, formerly=old,
                       rename_only=only)
    said = _RELATION_SUBJECT.match(text)
    if said is not None:
        if _NAMING.match(said["rest"]):
            return None
        return Mention(said["name"], said["relation"].casefold())
    subject = _NAME_SUBJECT.match(text)
    if subject is not None and rules.key(subject["name"]) not in _NOT_NAMES:
        return Mention(subject["name"], None, known_only=True)
    return None


def _real_name(name: str | None) -> str | None:
    if name is None:
        return None
    bare = _NO_NAME_PREFIX.sub("", name.strip())
    if rules.relation_key(bare) in {rules.relation_key(r) for r in rules.PERSON_RELATIONS}:
        return None
    return name


def _relation_of(text: str, name: str) -> str | None:
    escaped = re.escape(name)
    for pattern in _RELATION_OF:
        found = re.search(pattern.format(name=escaped), text, re.IGNORECASE)
        if found is not None:
            return found["relation"].casefold()
    return None


_POSSESSIVE = re.compile(r"['\u2019]s(?!\w)")


def _names(text: str, name: str | None, relation: str | None) -> bool:
    said = f" {rules.key(_POSSESSIVE.sub('', text))} "  # "Sam's partner" names Sam
    words = {rules.key(name), rules.key(relation), rules.relation_key(relation)}
    return any(f" {word} " in said for word in words if word)


# "The user adopted a puppy." (not "The user's ..."): what extraction wrote of the user.
_USER_DID = re.compile(r"^the user (?P<said>(?!" + _APOSTROPHE + r")\S.*)$", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?\n]+")
_LITTLE_WORDS = frozenset({"the", "and", "for", "with", "from", "that", "this", "has", "have",
                           "was", "are", "his", "her", "their", "they", "them", "who", "not"})


def restated(text: str, name: str | None, said: Sequence[str]) -> str | None:
    """The fact retold of ``name`` where extraction wrote the user as its subject but
    said it is about ``name``, and a sentence of the user's own messages tells it of
    them: "Liz just adopted a puppy." answered as "The user adopted a puppy." about Liz
    (the 1.5B model) is "Liz adopted a puppy.". None when the user's words do not say
    it of that name (then the fact is nobody's, as before)."""
    name = _real_name(name)
    did = _USER_DID.match(text.strip())
    if name is None or did is None or rules.key(name) in _NOT_NAMES \
            or _names(text, name, None):
        return None  # "The user helped Liz move.": the user's words, and about Liz
    words = [w for w in _words(did["said"]) if len(w) > 2 and w not in _LITTLE_WORDS]
    if not words:
        return None
    named = re.compile(r"(?<!\w)" + re.escape(rules.key(name)) + r"(?!\w)")
    for message in said:
        for sentence in _SENTENCE.findall(message.casefold()):
            heard = {w[:5] for w in _words(sentence)}
            if named.search(sentence) and all(w[:5] in heard for w in words):
                return f"{name} {did['said']}"
    return None


def _words(text: str) -> list[str]:
    return [w.strip("'\u2019") for w in _WORD.findall(text.casefold())]


# The user's own words telling what a named person is to them now: "Mia is my wife
# now", "Sam is now my partner", "Tom has become my boss".
_BECAME = re.compile(r"(?<![\w'\u2019])(?P<name>" + _NAME + r") (?:is now|is|has become|became) "
                     r"my " + _RELATION + r"(?![\w'\u2019-])", re.IGNORECASE)


def said_relation(mention: Mention | None, said: Sequence[str]) -> Mention | None:
    """``mention`` with the relation the user's own words last gave its name ("Mia is
    my wife now."), which wins over what extraction wrote: the 1.5B model answered it
    "The user is Mia's girlfriend." about {"Mia", "girlfriend"}."""
    if mention is None or mention.name is None:
        return mention
    wanted = rules.key(mention.name)
    given = [m["relation"].casefold() for message in said for m in _BECAME.finditer(message)
             if rules.key(m["name"]) == wanted]
    if not given or rules.relation_key(given[-1]) == rules.relation_key(mention.relation):
        return mention
    return replace(mention, relation=given[-1])
