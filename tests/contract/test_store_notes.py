"""Notes (docs/notes.md), one contract on both stores: a run's notes commit with it or not
at all, the same-session neighbour, the reads, the removal, the search and the erase."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.contract.test_store_contract import NOW, Store, advance, commit, insert, vec
from worker.errors import CursorFenced, MemoryOptedOut
from worker.store.note_types import InsertNote
from worker.store.types import ConsentGate, Erasure

MODEL = "test"


def note(text: str, embedding: np.ndarray, supersedes: int | None = None) -> InsertNote:
    return InsertNote(text, embedding, MODEL, supersedes)


async def test_a_runs_notes_commit_with_it_and_a_refused_commit_writes_none(
    store: Store,
) -> None:
    run_id = await store.commit_run(replace(
        commit(advance(0), (insert(0, "Lives in Oslo", vec(0)),)),
        notes=(note("The user is considering a move.", vec(5)),)))
    (kept,) = await store.notes("u1")
    assert (kept.text, kept.source_session_id, kept.observed_at) == (
        "The user is considering a move.", "s1", NOW)
    assert kept.embedding_model == MODEL and kept.embedding_dim == len(vec(5))
    assert [f.text for f in await store.facts("u1")] == ["Lives in Oslo"], "never a fact"
    assert run_id >= 1
    with pytest.raises(CursorFenced):
        await store.commit_run(replace(commit(advance(0), (), None),
                                       notes=(note("Lost", vec(6)),)))
    await store.set_consent("u1", False)
    with pytest.raises(MemoryOptedOut):
        await store.commit_run(replace(commit(advance(1, position=1), (), None),
                                       notes=(note("Lost too", vec(7)),)))
    assert [n.text for n in await store.notes("u1")] == ["The user is considering a move."]


async def test_the_neighbour_is_the_sessions_nearest_active_note_and_updates_chain(
    store: Store,
) -> None:
    await store.commit_run(replace(commit(advance(0), (), None),
                                   notes=(note("Renovation", vec(1)), note("Cello", vec(9)))))
    await store.commit_run(replace(commit(advance(0, session="s2"), (), None),
                                   notes=(note("Renovation too", vec(1)),)))
    first, cello, _ = await store.notes("u1", state="all")
    found = await store.note_neighbors("u1", "s1", np.stack([vec(1, 2), vec(30)]), MODEL)
    assert found[0] is not None and found[0].id == first.id and found[0].text == "Renovation"
    assert found[0].distance == pytest.approx(1 - 1 / np.sqrt(2), abs=1e-3)
    assert found[1] is not None and found[1].id in (first.id, cello.id)
    assert await store.note_neighbors("u1", "s9", np.stack([vec(1)]), MODEL) == [None]
    assert await store.note_neighbors("u1", "s1", np.stack([vec(1)]), "other") == [None]
    assert await store.note_neighbors("u2", "s1", np.stack([vec(1)]), MODEL) == [None]
    # A newer wording in the session supersedes the older one: a chain.
    await store.commit_run(replace(commit(advance(1, position=1), (), None),
                                   notes=(note("Renovation, $40k", vec(1, 2), first.id),)))
    by_id = {n.id: n for n in await store.notes("u1", state="all")}
    old = by_id[first.id]
    assert old.superseded_reason == "updated" and old.superseded_by is not None
    assert by_id[old.superseded_by].text == "Renovation, $40k"
    assert sorted(n.text for n in await store.notes("u1")) == [
        "Cello", "Renovation too", "Renovation, $40k"]


async def test_notes_are_the_users_alone_removed_never_deleted_and_searched(
    store: Store,
) -> None:
    await store.commit_run(replace(commit(advance(0), (), None), notes=(
        note("The user is considering a kitchen renovation", vec(1)),
        note("The user is thinking about the cello", vec(2)))))
    await store.commit_run(replace(commit(advance(0, user="u2"), (), None),
                                   notes=(note("The user is considering a kitchen", vec(1)),)))
    kitchen, cello = await store.notes("u1")
    hits = {h.note.text: h for h in await store.search_notes("u1", vec(1), "kitchen", 5)}
    assert set(hits) == {kitchen.text, cello.text}
    assert hits[kitchen.text].semantic_rank == 1 and hits[kitchen.text].lexical_rank == 1
    assert hits[cello.text].lexical_rank is None
    assert await store.remove_note("u2", kitchen.id) is None, "another user's id: none"
    removed = await store.remove_note("u1", kitchen.id)
    assert removed is not None and removed.superseded_reason == "removed"
    assert await store.remove_note("u1", kitchen.id) is None, "once"
    assert [n.text for n in await store.notes("u1")] == [cello.text]
    assert len(await store.notes("u1", state="all")) == 2
    # A read for a prompt finds none while memory is off; the user's own view does.
    await store.set_consent("u1", False)
    assert await store.notes("u1", consent_gate=ConsentGate()) == []
    assert await store.search_notes("u1", vec(2), "cello", 5, consent_gate=ConsentGate()) == []
    assert [n.text for n in await store.notes("u1")] == [cello.text]
    counts = await store.erase_user(Erasure("u1", erased_seq=5))
    assert counts["memory_note"] == 2
    assert await store.notes("u1", state="all") == []
    assert [n.user_id for n in await store.notes("u2")] == ["u2"]
