"""The user's corrections on both stores: a fact edited, a held proposal accepted or
dismissed (docs/memory_model.md, "The user's corrections")."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.contract.test_store_contract import Store, advance, commit, insert, vec
from worker.store.person_types import NewPerson, PersonLabel, PersonWrites
from worker.store.types import (
    Acceptance,
    ExistingRow,
    FactEdit,
    FactRecord,
    FactTerms,
    HoldProposal,
    InsertFact,
    NewFact,
)


def edit(text: str, old: FactRecord, **changes: Any) -> FactEdit:
    fields: dict[str, Any] = {
        "category": old.category, "importance": old.importance, "embedding": vec(2),
        "embedding_model": "test", "valid_from": old.valid_from, "valid_to": old.valid_to,
        "expires_at": old.expires_at}
    return FactEdit(text=text, **{**fields, **changes})


async def version(store: Store, user: str = "u1") -> int:
    return (await store.neighbors(user, vec(0)[None, :], 1)).version


async def held(store: Store, event: str = "UPDATE",
               text: str | None = "Likes blues") -> tuple[FactRecord, dict[str, Any]]:
    """A worker's fact the user pinned, and the change a later run held for them."""
    await store.commit_run(commit(advance(0), (insert(0, "Likes jazz", vec(0)),)))
    (jazz,) = await store.facts("u1")
    await store.set_pinned("u1", jazz.id, True)
    hold = HoldProposal(ExistingRow(jazz.id), event, "pinned", text)
    await store.commit_run(commit(advance(1, position=1), (hold,), 2))
    (proposal,) = await store.held_proposals("u1")
    return jazz, proposal


ACCEPT = Acceptance(resolved_by="user", embedding=vec(3), embedding_model="test")


async def test_an_edit_supersedes_the_version_in_its_chain(store: Store) -> None:
    terms = FactTerms(scope="relationship", agent_id="sam", confidence=1.0,
                      valid_from=datetime(2025, 1, 1, tzinfo=UTC))
    old = await store.add_fact("u1", NewFact("Calls the assistant Sam", "relationship", 6,
                                             vec(1), "test", terms, pinned=True))
    before = await version(store)
    new = await store.edit_fact("u1", old.id, edit("Calls the assistant Samwise", old))
    assert new is not None and new.id != old.id
    assert (new.text, new.source_kind, new.basis, new.confidence) == (
        "Calls the assistant Samwise", "manual", "stated", 1.0)
    assert (new.scope, new.agent_id, new.pinned, new.category, new.importance) == (
        "relationship", "sam", True, "relationship", 6), "scope, agent and pin are kept"
    assert await version(store) == before + 1
    chain = await store.chain("u1", new.id)
    assert [f.id for f in chain] == [old.id, new.id]
    assert chain == await store.chain("u1", old.id)
    ended = chain[0]
    assert (ended.superseded_by, ended.superseded_reason) == (new.id, "updated")
    assert ended.superseded_at == new.observed_at
    # No valid_from of its own: a correction, valid where the old one was, which was
    # never true (valid for no time at all).
    assert new.valid_from == old.valid_from and ended.valid_to == old.valid_from
    assert [f.text for f in await store.facts("u1", scope="all")] == [new.text]
    assert await store.facts("u1", scope="all",
                             valid_at=datetime(2025, 6, 1, tzinfo=UTC)) == [new]


async def test_an_edit_records_how_it_was_written_an_accepted_update_none(
    store: Store,
) -> None:
    old = await store.add_fact("u1", NewFact("Uses Vim", "fact", 5, vec(1), "test",
                                             via="panel"))
    assert old.written_via == "panel"
    new = await store.edit_fact("u1", old.id, edit("Uses Neovim", old, via="tool"))
    assert new is not None and new.written_via == "tool"
    by_default = await store.edit_fact("u1", new.id, edit("Uses Helix", new))
    assert by_default is not None and by_default.written_via == "api"
    assert [f.written_via for f in await store.chain("u1", old.id)] == ["panel", "tool", "api"]


async def test_an_edit_with_a_later_valid_from_ends_the_old_version_there(
    store: Store,
) -> None:
    old = await store.add_fact("u1", NewFact("Lives in Paris", "fact", 5, vec(0), "test",
                                             FactTerms(valid_from=datetime(2020, 1, 1,
                                                                           tzinfo=UTC))))
    moved = datetime(2025, 3, 1, tzinfo=UTC)
    new = await store.edit_fact("u1", old.id, edit("Lives in Lyon", old, valid_from=moved))
    assert new is not None and new.valid_from == moved
    (ended, _) = await store.chain("u1", old.id)
    assert ended.valid_to == moved
    in_2024 = await store.facts("u1", valid_at=datetime(2024, 1, 1, tzinfo=UTC))
    assert [f.text for f in in_2024] == ["Lives in Paris"]


async def test_an_edit_of_a_stale_missing_or_anothers_fact_writes_nothing(
    store: Store,
) -> None:
    old = await store.add_fact("u1", NewFact("Uses Vim", "preference", 5, vec(0), "test"))
    new = await store.edit_fact("u1", old.id, edit("Uses Neovim", old))
    assert new is not None
    before = await version(store)
    assert await store.edit_fact("u1", old.id, edit("Uses Emacs", old)) is None, "a stale view"
    assert await store.edit_fact("u2", new.id, edit("Uses Emacs", new)) is None
    assert await store.edit_fact("u1", 999_999, edit("Uses Emacs", new)) is None
    await store.remove_fact("u1", new.id)
    after_remove = await version(store)
    assert after_remove == before + 1
    assert await store.edit_fact("u1", new.id, edit("Uses Emacs", new)) is None
    assert await version(store) == after_remove, "a refused edit bumps nothing"
    assert [f.text for f in await store.facts("u1", include_superseded=True)] == [
        "Uses Vim", "Uses Neovim"]


async def test_a_worker_commit_after_the_read_makes_the_edit_stale(store: Store) -> None:
    await store.commit_run(commit(advance(0), (insert(0, "Lives in Paris", vec(0)),)))
    (paris,) = await store.facts("u1")
    # The user's panel read Paris; a worker then replaced it before the edit arrived.
    moved = InsertFact(ref=0, text="Lives in Lisbon", category="fact", importance=5,
                       embedding=vec(1), supersedes=ExistingRow(paris.id))
    await store.commit_run(commit(advance(1, position=1), (moved,), 1))
    assert await store.edit_fact("u1", paris.id, edit("Lives in Lyon", paris)) is None
    assert [f.text for f in await store.facts("u1")] == ["Lives in Lisbon"], "no lost write"


async def test_an_accepted_update_supersedes_its_fact_and_answers_the_proposal(
    store: Store,
) -> None:
    jazz, proposal = await held(store)
    assert proposal["stale"] is False and proposal["resolution"] is None
    before = await version(store)
    done = await store.accept_held("u1", proposal["id"], ACCEPT)
    assert done.status == "done" and done.fact is not None and done.proposal is not None
    blues = done.fact
    assert (blues.text, blues.source_kind, blues.source_session_id, blues.basis) == (
        "Likes blues", "extracted", "s1", "stated")
    assert blues.written_via is None, "extracted: no manual way in"
    assert blues.pinned and blues.scope == "profile", "the pin stays with the fact"
    assert blues.valid_from == proposal["proposed_at"]
    assert await version(store) == before + 1
    answered = done.proposal
    assert (answered["resolution"], answered["resolved_by"], answered["result_fact_id"],
            answered["stale"]) == ("accepted", "user", blues.id, False)
    assert answered["resolved_at"] is not None
    chain = await store.chain("u1", jazz.id)
    assert [(f.text, f.superseded_reason, f.superseded_by) for f in chain] == [
        ("Likes jazz", "updated", blues.id), ("Likes blues", None, None)]
    assert chain[0].valid_to == blues.valid_from
    assert [f.text for f in await store.facts("u1")] == ["Likes blues"]
    assert await store.held_proposals("u1") == [], "open ones by default"
    assert await store.held_proposals("u1", state="resolved") == [answered]
    assert await store.held_proposals("u1", state="all") == [answered]
    for again in (await store.accept_held("u1", proposal["id"], ACCEPT),
                  await store.dismiss_held("u1", proposal["id"], "user")):
        assert (again.status, again.proposal, again.fact) == ("resolved", answered, None)
    assert await version(store) == before + 1, "a refused answer bumps nothing"
    assert len(await store.facts("u1", include_superseded=True)) == 2


async def test_an_accepted_delete_ends_its_fact(store: Store) -> None:
    jazz, proposal = await held(store, "DELETE", None)
    done = await store.accept_held("u1", proposal["id"],
                                   Acceptance(resolved_by="key:0123456789ab"))
    assert done.status == "done" and done.fact is not None and done.proposal is not None
    assert (done.fact.id, done.fact.superseded_reason, done.fact.superseded_by) == (
        jazz.id, "deleted", None)
    assert done.fact.valid_to == max(jazz.valid_from or jazz.observed_at,
                                     proposal["proposed_at"])
    assert await store.get_fact("u1", jazz.id) == done.fact
    assert (done.proposal["resolution"], done.proposal["resolved_by"],
            done.proposal["result_fact_id"]) == ("accepted", "key:0123456789ab", None)
    assert await store.facts("u1") == []
    assert [f.id for f in await store.chain("u1", jazz.id)] == [jazz.id]


async def test_accept_after_the_fact_changed_is_stale_and_writes_nothing(
    store: Store,
) -> None:
    jazz, proposal = await held(store)
    # The user edits the pinned fact themselves after the proposal was held.
    mine = await store.edit_fact("u1", jazz.id, edit("Likes bebop", jazz))
    assert mine is not None
    before = await version(store)
    refused = await store.accept_held("u1", proposal["id"], ACCEPT)
    assert refused.status == "stale" and refused.fact is None and refused.proposal is not None
    assert refused.proposal["stale"] is True and refused.proposal["resolution"] is None
    assert await version(store) == before
    assert [f.text for f in await store.facts("u1")] == ["Likes bebop"]
    assert len(await store.facts("u1", include_superseded=True)) == 2
    (listed,) = await store.held_proposals("u1")
    assert (listed["id"], listed["stale"]) == (proposal["id"], True), "still open, stale"
    dismissed = await store.dismiss_held("u1", proposal["id"], "user")
    assert dismissed.status == "done" and dismissed.proposal is not None
    assert (dismissed.proposal["resolution"], dismissed.proposal["stale"]) == (
        "dismissed", False)
    assert (await store.accept_held("u1", proposal["id"], ACCEPT)).status == "resolved"


async def test_an_expired_fact_makes_its_proposal_stale(store: Store) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=0.5)
    fact = await store.add_fact("u1", NewFact("Is in Rome", "event", 5, vec(0), "test",
                                              FactTerms(expires_at=soon, confidence=1.0)))
    hold = HoldProposal(ExistingRow(fact.id), "DELETE", "outranked", None)
    await store.commit_run(commit(advance(0), (hold,), await version(store)))
    (proposal,) = await store.held_proposals("u1")
    assert proposal["stale"] is False
    await asyncio.sleep((soon - datetime.now(UTC)).total_seconds() + 0.1)
    # Expired, though the expiry pass has not superseded it yet: no longer the version.
    (listed,) = await store.held_proposals("u1")
    assert listed["stale"] is True
    assert (await store.accept_held("u1", proposal["id"], ACCEPT)).status == "stale"
    assert await store.edit_fact("u1", fact.id, edit("Is in Milan", fact)) is None
    assert (await store.get_fact("u1", fact.id)) == fact


async def test_a_dismissal_records_the_refusal_and_changes_no_fact(store: Store) -> None:
    jazz, proposal = await held(store)
    before = await version(store)
    done = await store.dismiss_held("u1", proposal["id"], "key:0123456789ab")
    assert done.status == "done" and done.fact is None and done.proposal is not None
    assert (done.proposal["resolution"], done.proposal["resolved_by"],
            done.proposal["result_fact_id"]) == ("dismissed", "key:0123456789ab", None)
    assert await version(store) == before, "no fact changed"
    assert await store.facts("u1") == [await store.get_fact("u1", jazz.id)]
    assert (await store.dismiss_held("u1", proposal["id"], "user")).status == "resolved"
    assert (await store.accept_held("u1", proposal["id"], ACCEPT)).status == "resolved"
    assert await store.held_proposals("u1") == []
    assert await store.held_proposal("u1", proposal["id"]) == done.proposal


async def test_another_users_proposal_is_missing(store: Store) -> None:
    _, proposal = await held(store)
    assert await store.held_proposal("u2", proposal["id"]) is None
    assert await store.held_proposals("u2", state="all") == []
    for outcome in (await store.accept_held("u2", proposal["id"], ACCEPT),
                    await store.dismiss_held("u2", proposal["id"], "user"),
                    await store.accept_held("u1", 999_999, ACCEPT)):
        assert (outcome.status, outcome.proposal, outcome.fact) == ("missing", None, None)
    assert (await store.held_proposal("u1", proposal["id"]) or {})["resolution"] is None


async def test_a_held_addition_about_a_person_keeps_them_and_is_accepted_as_theirs(
    store: Store,
) -> None:
    # Ana is met in a new fact and in a held addition; Tom only in a held addition, and
    # is created all the same (the user named him); the user's own addition has none.
    ana, tom = NewPerson(1), NewPerson(2)
    writes = (
        InsertFact(ref=0, text="The user's sister Ana is vegetarian", category="fact",
                   importance=5, embedding=vec(0), terms=FactTerms(person=ana)),
        HoldProposal(None, "ADD", "undecided", "Lives in Milan", category="fact",
                     importance=5),
        HoldProposal(None, "ADD", "undecided", "Ana is vegan", category="fact", importance=5,
                     terms=FactTerms(person=ana)),
        HoldProposal(None, "ADD", "undecided", "Tom moved to Berlin", category="fact",
                     importance=4, terms=FactTerms(person=tom)))
    persons = PersonWrites(create=(PersonLabel("Ana", "sister"), PersonLabel("Tom", "boss")))
    await store.commit_run(replace(commit(advance(0), writes), persons=persons))
    ids = {p.display_name: p.id for p in await store.persons("u1")}
    assert set(ids) == {"Ana", "Tom"}
    held = await store.held_proposals("u1")
    assert [(h["text"], h["person_id"]) for h in held] == [
        ("Lives in Milan", None), ("Ana is vegan", ids["Ana"]),
        ("Tom moved to Berlin", ids["Tom"])]
    assert (await store.held_proposal("u1", held[1]["id"]) or {})["person_id"] == ids["Ana"]
    assert await store.held_proposal("u2", held[1]["id"]) is None
    assert (await store.accept_held("u2", held[1]["id"], ACCEPT)).status == "missing"
    done = await store.accept_held("u1", held[1]["id"], ACCEPT)
    assert done.status == "done" and done.fact is not None
    assert (done.fact.text, done.fact.person_id) == ("Ana is vegan", ids["Ana"])
    assert [f.text for f in await store.facts("u1")] == [], "Ana's, never the user's"
    mine = await store.accept_held("u1", held[0]["id"], ACCEPT)
    assert mine.fact is not None and mine.fact.person_id is None
    assert [f.text for f in await store.facts("u1")] == ["Lives in Milan"]
