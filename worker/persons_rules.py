"""The rules about a user's persons that the worker, the store and the API share
(docs/persons.md): how names and relations are cleaned and compared, which relations
a user has one of, and what a merge keeps. Standard library only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Protocol

MAX_PERSON_NAME_CHARS = 100
MAX_RELATION_CHARS = 40
MAX_ALIASES = 20

# The same relation said in other words ("mom", "mum"): compared as one.
RELATION_SYNONYMS: dict[str, str] = {
    "mom": "mother", "mum": "mother", "mommy": "mother", "mummy": "mother", "mama": "mother",
    "dad": "father", "daddy": "father", "papa": "father", "hubby": "husband",
    "missus": "wife", "spouse": "partner", "bf": "boyfriend", "gf": "girlfriend",
    "manager": "boss", "supervisor": "boss",
}
# Relations a user has one of at a time: "my wife" is the same person as an earlier
# "my wife", and a name said later ("my wife Sarah") is hers. A "friend" or a
# "sister" may be one of several, so a nameless one is only ever a guess.
SINGLE_RELATIONS = frozenset({
    "wife", "husband", "partner", "girlfriend", "boyfriend", "fiance", "fiancee",
    "mother", "father", "boss", "stepmother", "stepfather",
})
# Who may be "my X" (the rules provider reads these; extraction's texts are read for
# them: worker.pipeline.attribution), longest first so "sister-in-law" is not "sister".
PERSON_RELATIONS = tuple(sorted({
    "wife", "husband", "partner", "girlfriend", "boyfriend", "son", "daughter",
    "brother", "sister", "mother", "father", "friend", "manager", "boss", "dog", "cat",
    "mom", "mum", "dad", "colleague", "coworker", "co-worker", "cousin", "aunt",
    "uncle", "grandmother", "grandfather", "grandma", "grandpa", "niece", "nephew",
    "neighbor", "neighbour", "roommate", "flatmate", "fiance", "fiancee", "fiancé",
    "fiancée", "stepmother", "stepfather", "stepson", "stepdaughter", "mother-in-law",
    "father-in-law", "sister-in-law", "brother-in-law", "best friend", "teacher", "coach",
    "doctor", "landlord", "kid", "baby", "twin",
}, key=len, reverse=True))
# What a model writes when it (wrongly) names the user as the one a fact is about.
SELF_RELATIONS = frozenset({"self", "user", "the user", "me", "myself", "i", "yourself"})
_SPACE = re.compile(r"\s+")
_NOT_WORD = re.compile(r"[^\w\s'-]")


class Named(Protocol):
    """What the rules read of a person's label."""

    @property
    def display_name(self) -> str | None: ...

    @property
    def relation(self) -> str | None: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...


def clean_label(text: str | None, limit: int) -> str | None:
    """A name, relation or alias on one line, trimmed; None when nothing is left.
    ValueError when it is too long or holds control characters (refused, not cut)."""
    if text is None:
        return None
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise ValueError("control characters are not allowed")
    text = _SPACE.sub(" ", text).strip()
    if not text:
        return None
    if len(text) > limit:
        raise ValueError(f"at most {limit} characters")
    return text


def key(text: str | None) -> str:
    """The form names are compared in: case-, space- and punctuation-blind."""
    if not text:
        return ""
    return " ".join(_NOT_WORD.sub("", text.casefold()).split())


def relation_key(relation: str | None) -> str:
    """A relation as compared: "my mom", "Mum" and "mother" are one."""
    word = key(relation).removeprefix("my ").strip()
    word = word.replace("é", "e")
    return RELATION_SYNONYMS.get(word, word)


def single(relation: str | None) -> bool:
    """Whether a user has one person of this relation at a time."""
    return relation_key(relation) in SINGLE_RELATIONS


def names_of(person: Named) -> list[str]:
    """Every name a person answers to, as compared (``key``): display name and aliases."""
    return [k for k in (key(n) for n in (person.display_name, *person.aliases)) if k]


def merged_aliases(target: Named, source: Named) -> tuple[str, ...]:
    """The target's aliases after a merge: its own, then the source's name and aliases,
    each once, never the target's own name, at most MAX_ALIASES (the newest kept)."""
    return bounded_aliases(target.display_name,
                           (*target.aliases, *(n for n in (source.display_name,) if n),
                            *source.aliases))


def bounded_aliases(display_name: str | None, aliases: Iterable[str]) -> tuple[str, ...]:
    """``aliases`` each once (as compared), without the display name, the newest
    MAX_ALIASES."""
    seen = {key(display_name)} if display_name else set()
    kept: list[str] = []
    for alias in aliases:
        k = key(alias)
        if k and k not in seen:
            seen.add(k)
            kept.append(alias)
    return tuple(kept[-MAX_ALIASES:])


def shown(person: Named) -> str:
    """How a person is named to a reader: "Ana (sister)", "Tom", "wife"."""
    if person.display_name and person.relation:
        return f"{person.display_name} ({person.relation})"
    return person.display_name or person.relation or ""


def matching(persons: Sequence[Named], name: str | None) -> list[int]:
    """Positions of the persons ``name`` names (display name or alias)."""
    wanted = key(name)
    return [i for i, p in enumerate(persons) if wanted and wanted in names_of(p)]


def is_self(relation: str | None) -> bool:
    """Whether a relation names the user themself ("self", "me", "the user")."""
    return key(relation) in SELF_RELATIONS
