"""Which of a user's facts a read returns: the rules of docs/memory_model.md, in Python.

PostgresStore says the same in SQL, each rule once, as the fragments of
worker/store/sql/fact_rules.sql (each function names its fragment); InMemoryStore
(worker/testing) reads through these functions alone, and
tests/contract/test_store_visibility.py holds the two together, case by case.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from worker.memory_rules import MEMORY_SCOPES, MemoryScope
from worker.store.types import ConsentGate, FactRecord


def check_read(
    scope: str, *, include_superseded: bool = False,
    valid_at: datetime | None = None, known_at: datetime | None = None,
) -> None:
    """Refuse a read that asks for two things at once (ValueError).

    Both times together would need the validity memfleet recorded at ``known_at``,
    which a later supersession overwrote: not kept, so not offered.
    """
    if scope not in MEMORY_SCOPES:
        raise ValueError(f"scope must be one of {', '.join(MEMORY_SCOPES)}")
    if valid_at is not None and known_at is not None:
        raise ValueError("valid_at and known_at cannot be combined")
    if include_superseded and (valid_at is not None or known_at is not None):
        raise ValueError("an as-of read already includes superseded rows")
    for moment in (valid_at, known_at):
        if moment is not None and moment.tzinfo is None:
            raise ValueError("as-of times must carry a time zone")


def check_exclude(exclude: Sequence[int], *, as_of: bool) -> None:
    """A search leaves facts out only on the read of now (the prompt split's volatile
    read); an "as of" search with ids to leave out is refused (ValueError)."""
    if exclude and as_of:
        raise ValueError("an as-of search cannot leave facts out")


def in_scope(fact: FactRecord, scope: MemoryScope, agent_id: str | None) -> bool:
    """The user's own facts (never one about a person of theirs): profile facts for
    ``profile`` and ``both``; relationship facts of ``agent_id`` only, for
    ``relationship`` and ``both``. Another agent's never. (fact_rules.sql in_scope)"""
    if fact.person_id is not None:
        return False
    if scope == "all":
        return True
    if fact.scope == "profile":
        return scope in ("profile", "both")
    return agent_id is not None and fact.agent_id == agent_id and scope in ("relationship",
                                                                            "both")


def consent_open(consent: bool | None, gate: ConsentGate | None) -> bool:
    """Whether a read behind ``gate`` finds the user's facts, given the user's own
    choice (``consent``, None: never chose): always without a gate (the user's own
    view), else while their memory is on, the gate's default if they never chose.
    (fact_rules.sql consent_gate)"""
    if gate is None:
        return True
    return gate.memory_default if consent is None else consent


def unexpired(fact: FactRecord, moment: datetime) -> bool:
    return fact.expires_at is None or fact.expires_at > moment


def active(fact: FactRecord, now: datetime) -> bool:
    """Not superseded, and not expired even before the expiry pass supersedes it.
    (fact_rules.sql active)"""
    return fact.superseded_at is None and unexpired(fact, now)


def true_at(fact: FactRecord, moment: datetime) -> bool:
    """True at ``moment`` by what memfleet knows now. An expiry ends the validity as
    the expiry pass will, so the answer does not wait for the pass; a removed fact
    was never true. (fact_rules.sql as_of, its valid_at)"""
    start = fact.valid_from or fact.observed_at
    end = fact.valid_to or fact.expires_at
    return (start <= moment and (end is None or end > moment)
            and fact.superseded_reason != "removed")


def believed_at(fact: FactRecord, moment: datetime) -> bool:
    """Believed at ``moment``: observed by then, not yet superseded, and not expired
    (a read then skipped it, whenever the expiry pass ran). (fact_rules.sql as_of, its
    known_at)"""
    return (fact.observed_at <= moment
            and (fact.superseded_at is None or fact.superseded_at > moment)
            and unexpired(fact, moment))


def visible(
    fact: FactRecord, scope: MemoryScope, agent_id: str | None, now: datetime, *,
    valid_at: datetime | None = None, known_at: datetime | None = None,
) -> bool:
    """Whether a read of the user's facts returns ``fact``: active now (fact_rules.sql
    visible) or, given one time, true or believed then (visible_as_of), and of the
    scope and agent asked. The consent gate, which is the user's and not the fact's,
    is consent_open."""
    if valid_at is not None:
        then = true_at(fact, valid_at)
    elif known_at is not None:
        then = believed_at(fact, known_at)
    else:
        then = active(fact, now)
    return then and in_scope(fact, scope, agent_id)
