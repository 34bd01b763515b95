"""The read side of the memory model on both stores: scopes and agents, the two
"as of" reads, expiry, pinning and held proposals (docs/memory_model.md)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.contract.test_store_contract import Store, advance, commit, insert, vec
from worker.errors import UserVersionConflict
from worker.store.types import (
    Acceptance,
    ConsentGate,
    ExistingRow,
    FactTerms,
    HoldProposal,
    NewFact,
    ReadPlan,
    SupersedeFact,
)


def at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


def profile(text: str) -> NewFact:
    return NewFact(text, "fact", 5, vec(0), "test")


def about(agent: str, text: str) -> NewFact:
    return NewFact(text, "relationship", 5, vec(1), "test",
                   FactTerms(scope="relationship", agent_id=agent, confidence=1.0))


async def texts(store: Store, user: str = "u1", **read: object) -> list[str]:
    return sorted(f.text for f in await store.facts(user, **read))  # type: ignore[arg-type]


async def test_two_agents_share_the_profile_and_keep_their_relationships(store: Store) -> None:
    await store.add_fact("u1", profile("Lives in Lisbon"))
    await store.add_fact("u1", about("sam", "Calls the assistant Sam"))
    await store.add_fact("u1", about("max", "Plays chess with Max"))
    await store.add_fact("u2", about("sam", "Another user's joke with Sam"))
    assert await texts(store, agent_id="sam") == ["Calls the assistant Sam", "Lives in Lisbon"]
    assert await texts(store, agent_id="max") == ["Lives in Lisbon", "Plays chess with Max"]
    assert await texts(store) == ["Lives in Lisbon"], "no agent: no relationship facts"
    assert await texts(store, scope="profile", agent_id="sam") == ["Lives in Lisbon"]
    assert await texts(store, scope="relationship", agent_id="sam") == [
        "Calls the assistant Sam"]
    assert await texts(store, scope="relationship") == []
    assert await texts(store, scope="none", agent_id="sam") == []
    assert await texts(store, scope="all") == [
        "Calls the assistant Sam", "Lives in Lisbon", "Plays chess with Max"], "every agent's"
    assert await store.count_active("u1", scope="all") == 3
    assert await texts(store, include_superseded=True, agent_id="max") == [
        "Lives in Lisbon", "Plays chess with Max"]
    assert await store.count_active("u1", agent_id="sam") == 2
    assert await store.count_active("u1", scope="relationship", agent_id="max") == 1
    assert await store.count_active("u1") == 1
    assert await store.count_active("u1", scope="none", agent_id="max") == 0
    hits = await store.search("u1", vec(1), "Sam or Max or chess or assistant", 10,
                              agent_id="sam")
    assert sorted(h.fact.text for h in hits) == ["Calls the assistant Sam", "Lives in Lisbon"]
    assert await store.search("u1", vec(1), "Sam", 10, scope="none", agent_id="sam") == []
    with pytest.raises(ValueError, match="scope"):
        await store.facts("u1", scope="everything")  # type: ignore[arg-type]


async def paris_then_lisbon(store: Store) -> tuple[int, int]:
    """Lives in Paris from 2024-01-01; said on 2026-11-24 to live in Lisbon since 2026-10-01."""
    paris = replace(insert(0, "Lives in Paris", vec(0)),
                    terms=FactTerms(valid_from=at("2024-01-01")))
    await store.commit_run(commit(advance(0), (paris,), observed_at=at("2024-01-05")))
    (old,) = await store.facts("u1")
    lisbon = replace(insert(0, "Lives in Lisbon", vec(0, 1), ExistingRow(old.id)),
                     terms=FactTerms(valid_from=at("2026-10-01")))
    await store.commit_run(commit(advance(1, position=1), (lisbon,), 1,
                                  observed_at=at("2026-11-24T10:00")))
    (new,) = await store.facts("u1")
    return old.id, new.id


async def test_as_of_reads_in_both_senses(store: Store) -> None:
    paris, lisbon = await paris_then_lisbon(store)
    assert await texts(store, valid_at=at("2026-09-15")) == ["Lives in Paris"]
    assert await texts(store, valid_at=at("2026-10-15")) == ["Lives in Lisbon"]
    assert await texts(store, valid_at=at("2023-06-01")) == []
    assert await texts(store, known_at=at("2026-11-01")) == ["Lives in Paris"]
    assert await texts(store, known_at=at("2026-11-24T11:00")) == ["Lives in Lisbon"]
    assert await texts(store, known_at=at("2024-01-04")) == []
    # As of a time, the scope still holds: no agent's facts, and none at all for none.
    assert await texts(store, scope="relationship", agent_id="sam",
                       valid_at=at("2026-09-15")) == []
    assert await texts(store, scope="none", known_at=at("2026-11-01")) == []
    hits = await store.search("u1", vec(0), "Paris or Lisbon", 5, valid_at=at("2026-09-15"))
    assert [h.fact.text for h in hits] == ["Lives in Paris"]
    hits = await store.search("u1", vec(0), "Paris or Lisbon", 5, known_at=at("2026-12-01"))
    assert [h.fact.text for h in hits] == ["Lives in Lisbon"]
    # The chain has every version with both times.
    chain = await store.chain("u1", lisbon)
    assert [f.id for f in chain] == [paris, lisbon]
    assert (chain[0].valid_from, chain[0].valid_to) == (at("2024-01-01"), at("2026-10-01"))
    assert (chain[0].observed_at, chain[0].superseded_at) == (at("2024-01-05"),
                                                              at("2026-11-24T10:00"))
    assert (chain[1].valid_from, chain[1].valid_to) == (at("2026-10-01"), None)
    assert chain[0].superseded_reason == "updated" and chain[1].superseded_at is None
    for bad in ({"valid_at": at("2026-01-01"), "known_at": at("2026-01-01")},
                {"include_superseded": True, "valid_at": at("2026-01-01")},
                {"valid_at": datetime(2026, 1, 1)}):  # no zone
        with pytest.raises(ValueError):
            await store.facts("u1", **bad)  # type: ignore[arg-type]


async def test_a_removed_fact_was_never_true_but_was_believed(store: Store) -> None:
    wrong = await store.add_fact("u1", profile("Has a cat"))
    await store.remove_fact("u1", wrong.id)
    now = datetime.now(UTC)
    assert await texts(store, valid_at=now - timedelta(seconds=1)) == []
    assert await texts(store, valid_at=now) == []
    assert await texts(store, known_at=wrong.observed_at) == ["Has a cat"]


async def test_an_expired_fact_leaves_reads_at_its_expires_at(store: Store) -> None:
    now = datetime.now(UTC)
    gone_at, later = now - timedelta(minutes=1), now + timedelta(hours=1)
    for text, expires in (("Is in Rome this week", gone_at), ("Is at a conference", later)):
        await store.add_fact("u1", replace(profile(text), terms=FactTerms(
            expires_at=expires, valid_from=now - timedelta(days=2), confidence=1.0)))
    assert await texts(store) == ["Is at a conference"], "expired: gone before the pass"
    assert await store.count_active("u1") == 1
    assert [h.fact.text for h in await store.search("u1", vec(0), "Rome", 5)] == [
        "Is at a conference"]
    assert await texts(store, valid_at=gone_at - timedelta(seconds=1)) == [
        "Is at a conference", "Is in Rome this week"]
    assert await texts(store, valid_at=gone_at) == ["Is at a conference"]
    assert await texts(store, known_at=datetime.now(UTC)) == ["Is at a conference"]
    assert await texts(store, include_superseded=True) == [
        "Is at a conference", "Is in Rome this week"], "nothing is deleted"
    rome = next(f for f in await store.facts("u1", include_superseded=True)
                if f.text.startswith("Is in Rome"))
    assert await store.set_pinned("u1", rome.id, True) is None, "an expired fact is not active"


async def test_pin_and_unpin_bump_the_version_and_stay_scoped(store: Store) -> None:
    fact = await store.add_fact("u1", profile("Is vegetarian"))
    version = (await store.neighbors("u1", vec(0)[None, :], 1)).version
    pinned = await store.set_pinned("u1", fact.id, True)
    assert pinned is not None and pinned.pinned and pinned.id == fact.id
    assert (await store.get_fact("u1", fact.id)) == pinned
    assert (await store.neighbors("u1", vec(0)[None, :], 1)).version == version + 1
    assert await store.set_pinned("u2", fact.id, False) is None, "another user's: missing"
    assert await store.set_pinned("u1", 999_999, True) is None
    assert (await store.neighbors("u1", vec(0)[None, :], 1)).version == version + 1, \
        "a miss bumps nothing"
    (read,) = await store.facts("u1")
    assert read.pinned
    unpinned = await store.set_pinned("u1", fact.id, False)
    assert unpinned is not None and not unpinned.pinned
    await store.remove_fact("u1", fact.id)
    assert await store.set_pinned("u1", fact.id, True) is None, "only active facts"


async def test_a_pinned_fact_is_not_superseded_and_held_proposals_are_read(
    store: Store,
) -> None:
    await store.commit_run(commit(advance(0), (insert(0, "Likes jazz", vec(0)),)))
    (jazz,) = await store.facts("u1")
    await store.set_pinned("u1", jazz.id, True)
    with pytest.raises(UserVersionConflict):
        await store.commit_run(commit(advance(1, position=1),
                                      (SupersedeFact(ExistingRow(jazz.id)),), 2))
    hold = HoldProposal(ExistingRow(jazz.id), "UPDATE", "pinned", "Likes blues")
    await store.commit_run(commit(advance(1, position=1), (hold,), 2))
    assert [f.text for f in await store.facts("u1")] == ["Likes jazz"]
    (held,) = await store.held_proposals("u1")
    assert set(held) == {"id", "fact_id", "run_id", "event", "reason", "text", "session_id",
                         "proposed_at", "resolution", "resolved_at", "resolved_by",
                         "result_fact_id", "category", "importance", "scope", "agent_id",
                         "person_id", "stale"}
    assert (held["fact_id"], held["event"], held["reason"], held["text"], held["session_id"]) \
        == (jazz.id, "UPDATE", "pinned", "Likes blues", "s1")
    assert (held["category"], held["importance"], held["scope"], held["person_id"]) == (
        None, None, None, None)
    assert held["run_id"] is not None and held["proposed_at"] is not None
    assert (held["resolution"], held["resolved_at"], held["resolved_by"], held["stale"]) == (
        None, None, None, False), "open, and its fact is the version it was held against"
    assert await store.held_proposals("u2") == []


async def test_an_undecided_candidate_is_held_as_an_addition_and_accepted_once(
    store: Store,
) -> None:
    terms = FactTerms(scope="relationship", agent_id="luna")
    hold = HoldProposal(None, "ADD", "undecided", "Wants to be called Jo", category="preference",
                        importance=4, terms=terms)
    await store.commit_run(commit(advance(0), (hold,)))
    assert await store.facts("u1", agent_id="luna") == [], "held, not added"
    (held,) = await store.held_proposals("u1")
    assert (held["fact_id"], held["event"], held["reason"], held["text"], held["stale"]) == (
        None, "ADD", "undecided", "Wants to be called Jo", False), "never stale: no fact"
    assert (held["category"], held["importance"], held["scope"], held["agent_id"]) == (
        "preference", 4, "relationship", "luna")
    done = await store.accept_held("u1", held["id"], Acceptance(
        resolved_by="user", embedding=vec(1), embedding_model="test", confidence=0.9))
    assert done.status == "done" and done.fact is not None
    fact = done.fact
    assert (fact.text, fact.category, fact.importance, fact.scope, fact.agent_id,
            fact.source_session_id, fact.basis) == (
        "Wants to be called Jo", "preference", 4, "relationship", "luna", "s1", "stated")
    assert done.proposal is not None and done.proposal["result_fact_id"] == fact.id
    assert [f.text for f in await store.facts("u1", agent_id="luna")] == [
        "Wants to be called Jo"]
    again = await store.accept_held("u1", held["id"], Acceptance(
        resolved_by="user", embedding=vec(1), embedding_model="test", confidence=0.9))
    assert again.status == "resolved", "answered once"


async def test_a_consent_gated_read_finds_nothing_while_memory_is_off(store: Store) -> None:
    """Reads for a prompt (consent_gate) find nothing while the user's memory is off;
    the user's own view (no gate) still shows what is kept; another user is untouched."""
    await store.add_fact("u1", profile("Lives in Lisbon"))
    await store.add_fact("u2", profile("Lives in Porto"))
    gate = ConsentGate(memory_default=True)

    async def gated(user: str) -> tuple[list[str], int, list[str], list[str]]:
        listed = sorted(f.text for f in await store.facts(user, consent_gate=gate))
        hits = await store.search(user, vec(0), "Lives", 10, consent_gate=gate)
        as_of = await store.search(user, vec(0), "Lives", 10, consent_gate=gate,
                                   known_at=datetime.now(UTC) + timedelta(seconds=1))
        return (listed, await store.count_active(user, consent_gate=gate),
                sorted(h.fact.text for h in hits), sorted(h.fact.text for h in as_of))

    on = (["Lives in Lisbon"], 1, ["Lives in Lisbon"], ["Lives in Lisbon"])
    assert await gated("u1") == on
    await store.set_consent("u1", False)
    assert await gated("u1") == ([], 0, [], [])
    assert await texts(store) == ["Lives in Lisbon"], "the user's own view still shows it"
    assert await texts(store, include_superseded=True) == ["Lives in Lisbon"]
    assert await texts(store, "u2", consent_gate=gate) == ["Lives in Porto"]
    await store.set_consent("u1", True)
    assert await gated("u1") == on
    # A user who never chose follows the fleet's default.
    assert await texts(store, "u2", consent_gate=ConsentGate(memory_default=False)) == []
    assert await texts(store, "u1", consent_gate=ConsentGate(memory_default=False)) == [
        "Lives in Lisbon"], "an explicit choice outranks the default"


async def test_a_prompt_reads_plan_and_newest_facts_agree_with_the_reads_they_replace(
    store: Store,
) -> None:
    """read_plan is count_active and active_embedding in one, stable_plan stable_facts
    and read_plan in one; newest_facts the last
    ``limit`` of facts, in facts' order; both behind the consent gate."""
    assert await store.read_plan("u1") == ReadPlan(0, None, 0)
    assert await store.stable_plan("u1", 5) == ([], ReadPlan(0, None, 0))
    for n in range(5):
        await store.add_fact("u1", profile(f"Profile fact {n}"))
    await store.add_fact("u1", about("sam", "Calls the assistant Sam"))
    await store.add_fact("u1", NewFact("Moved fact", "fact", 5, vec(2), "other-model"))
    await store.add_fact("u2", profile("Another user's fact"))
    gate = ConsentGate(memory_default=True)
    for read in ({}, {"agent_id": "sam"}, {"scope": "relationship", "agent_id": "sam"},
                 {"scope": "all"}, {"scope": "none"}, {"consent_gate": gate}):
        plan = await store.read_plan("u1", **read)
        assert plan == ReadPlan(await store.count_active("u1", **read),
                                await store.active_embedding("u1"), 0), read
        listed = await store.facts("u1", **read)
        for limit in (1, 3, 50):
            newest = await store.newest_facts("u1", limit, **read)
            assert [f.id for f in newest] == [f.id for f in listed[-limit:]], (read, limit)
            assert await store.stable_plan("u1", limit, **read) == (
                await store.stable_facts("u1", limit, **read), plan), (read, limit)
    assert (await store.read_plan("u1")).embedding == ("test", len(vec(0)))
    await store.set_consent("u1", False)
    assert (await store.read_plan("u1", consent_gate=gate)).active == 0
    assert (await store.stable_plan("u1", 3, consent_gate=gate))[0] == []
    assert await store.newest_facts("u1", 3, consent_gate=gate) == []
    assert len(await store.newest_facts("u1", 3)) == 3, "the user's own view"
