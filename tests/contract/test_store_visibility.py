"""One visibility rule in two languages: the SQL fragments of
worker/store/sql/fact_rules.sql and the functions of worker/store/visibility.py.

A user's facts cover every branch of the rule (profile and relationship facts of two
agents, superseded, removed, expired and expiring rows, validity that ended, an "as
of" history); each read (every scope and agent, now and as of several times, each
consent gate against each choice of the user) must return exactly the rows that
visibility.py picks from the user's whole history, in the read's order. On
PostgresStore this holds the SQL to the Python, case by case; InMemoryStore reads
through those functions, so there it checks the cases themselves.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import product

from tests.contract.test_store_contract import Store, advance, commit, insert, vec
from worker.memory_rules import MEMORY_SCOPES, MemoryScope
from worker.store import visibility
from worker.store.types import ConsentGate, ExistingRow, FactRecord, FactTerms, NewFact

DAY = timedelta(days=1)


def _new(text: str, agent: str | None = None, **terms: datetime) -> NewFact:
    scope = "profile" if agent is None else "relationship"
    return NewFact(text, "fact", 5, vec(len(text) % 4), "test",
                   FactTerms(scope=scope, agent_id=agent, confidence=1.0, **terms))


async def _user_with_every_case(store: Store, now: datetime) -> None:
    # A history written by the pipeline at given times: Paris, then Lisbon.
    paris = replace(insert(0, "Lives in Paris", vec(0)),
                    terms=FactTerms(valid_from=now - 60 * DAY))
    await store.commit_run(commit(advance(0), (paris,), observed_at=now - 30 * DAY))
    (old,) = await store.facts("u1")
    lisbon = replace(insert(0, "Lives in Lisbon", vec(0, 1), ExistingRow(old.id)),
                     terms=FactTerms(valid_from=now - 10 * DAY))
    await store.commit_run(commit(advance(1, position=1), (lisbon,), 1,
                                  observed_at=now - 3 * DAY))
    # Facts written by hand now: every scope, agent, lifetime and validity.
    await store.add_fact("u1", _new("Likes tea"))
    await store.add_fact("u1", _new("Calls the assistant Sam", "sam"))
    await store.add_fact("u1", _new("Plays chess with Max", "max"))
    await store.add_fact("u1", _new("Is in Rome this week", expires_at=now - timedelta(minutes=5),
                                    valid_from=now - 2 * DAY))
    await store.add_fact("u1", _new("Is at a conference", "sam", expires_at=now + DAY,
                                    valid_from=now - 2 * DAY))
    await store.add_fact("u1", _new("Studied in Porto", valid_from=now - 40 * DAY,
                                    valid_to=now - 20 * DAY))
    removed = await store.add_fact("u1", _new("Has a cat", valid_from=now - 5 * DAY))
    await store.remove_fact("u1", removed.id)
    await store.add_fact("u2", _new("Another user's fact"))
    await store.add_fact("u2", _new("Another user's joke with Sam", "sam"))


def _expected(history: list[FactRecord], scope: MemoryScope, agent: str | None,
              consent: bool | None, gate: ConsentGate | None,
              valid_at: datetime | None, known_at: datetime | None) -> list[int]:
    if not visibility.consent_open(consent, gate):
        return []
    now = datetime.now(UTC)
    return [f.id for f in sorted(history, key=lambda f: (f.observed_at, f.id))
            if visibility.visible(f, scope, agent, now, valid_at=valid_at, known_at=known_at)]


async def _check(store: Store, history: list[FactRecord], scope: MemoryScope,
                 agent: str | None, consent: bool | None, gate: ConsentGate | None,
                 moment: dict[str, datetime]) -> None:
    case = f"scope={scope} agent={agent} consent={consent} gate={gate} {moment}"
    want = _expected(history, scope, agent, consent, gate, moment.get("valid_at"),
                     moment.get("known_at"))
    got = await store.facts("u1", scope=scope, agent_id=agent, consent_gate=gate,
                            **moment)  # type: ignore[arg-type]
    assert [f.id for f in got] == want, case
    hits = await store.search("u1", vec(0), "Lives or Likes or Sam", 100, scope=scope,
                              agent_id=agent, consent_gate=gate,
                              **moment)  # type: ignore[arg-type]
    assert sorted(h.fact.id for h in hits) == sorted(want), f"search: {case}"
    if moment:
        return
    assert await store.count_active("u1", scope=scope, agent_id=agent,
                                    consent_gate=gate) == len(want), f"count: {case}"
    plan = await store.read_plan("u1", scope=scope, agent_id=agent, consent_gate=gate)
    assert plan.active == len(want), f"read_plan: {case}"
    newest = await store.newest_facts("u1", 2, scope=scope, agent_id=agent, consent_gate=gate)
    assert [f.id for f in newest] == want[-2:], f"newest: {case}"
    whole = await store.facts("u1", include_superseded=True, scope=scope, agent_id=agent,
                              consent_gate=gate)
    assert [f.id for f in whole] == sorted(
        f.id for f in history if visibility.consent_open(consent, gate)
        and visibility.in_scope(f, scope, agent)), f"history: {case}"


async def test_every_read_returns_what_the_python_rule_picks(store: Store) -> None:
    now = datetime.now(UTC)
    await _user_with_every_case(store, now)
    history = await store.facts("u1", include_superseded=True, scope="all")
    assert len(history) == 9 and {f.user_id for f in history} == {"u1"}
    moments: list[dict[str, datetime]] = [{}]
    for ago in (50 * DAY, 25 * DAY, 7 * DAY, 4 * DAY, DAY, timedelta(0)):
        moments += [{"valid_at": now - ago}, {"known_at": now - ago}]
    moments += [{"valid_at": now + 2 * DAY}, {"known_at": now + 2 * DAY}]
    for scope, agent, moment in product(MEMORY_SCOPES, (None, "sam", "max"), moments):
        await _check(store, history, scope, agent, None, None, moment)
    # The consent gate: each choice of the user (none yet, on, off) against each gate.
    gates = (None, ConsentGate(memory_default=True), ConsentGate(memory_default=False))
    for consent in (None, True, False):
        if consent is not None:
            await store.set_consent("u1", consent)
        for gate, moment in product(gates, ({}, {"known_at": now - DAY})):
            await _check(store, history, "both", "sam", consent, gate, moment)
