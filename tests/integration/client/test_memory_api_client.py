"""MemoryApi (blocking) against the real memory API over HTTP and a real `memfleet
worker` process committing through the LLM stub, on real PostgreSQL and Redis:
every route of docs/api.md through the client, from a hand-over to the erase, and
its refusals as worker.errors' classes, each naming the operation and the host and
never the key."""

from __future__ import annotations

import logging
import re
import traceback

import pytest

from tests.api_server import free_port, new_key, token
from tests.helpers import WorkerProcesses, bot_msg, user_msg
from tests.integration.api.conftest import ID_KEY
from worker.client import (
    AccessDenied,
    HandoverUnavailable,
    InvalidHandover,
    InvalidRequest,
    MemoryApi,
    MemoryApiUnavailable,
    NotFound,
    WriteConflict,
    session_tag,
)
from worker.store.service_keys import ServiceKeyStore

WAIT_S = 60.0  # a worker process on a loaded 2-core machine


def say(chat: MemoryApi, user: str, session: str, text: str) -> int:
    """Hand a turn over and wait until the worker's commit covers it."""
    handed = chat.hand_over(user_id=user, session_id=session,
                            messages=[user_msg(text), bot_msg("Noted.")])
    assert handed.handover_id >= 1
    outcome = chat.wait_for_memory(user_id=user, session_id=session,
                                   handover_id=handed.handover_id, timeout_s=WAIT_S)
    assert outcome.covered, outcome
    return handed.handover_id


def texts(api: MemoryApi, user: str) -> list[str]:
    return sorted(fact.text for fact in api.facts(user).facts)


async def test_every_route_through_the_client_from_hand_over_to_erase(
    api_url: str, keys: ServiceKeyStore, worker: WorkerProcesses,
) -> None:
    chat = MemoryApi(api_url, service_key=await new_key(keys, "handover", "read", "admin"),
                     timeout_s=30)
    ada = MemoryApi(api_url, token=lambda: token("ada"), timeout_s=30)  # her own token
    assert chat.healthz() and chat.readyz().ready

    # The hand-over, its status and the wait: read-your-writes.
    before = chat.memory_status(user_id="ada", session_id="s1")
    assert (before.latest, before.finished, before.older_lists) == (0, 0, 0)
    assert before.session_tag == session_tag("s1", "ada", ID_KEY)
    first = say(chat, "ada", "s1", "I live in Paris.")
    status = ada.memory_status(user_id="ada", session_id="s1")
    assert status.covers(first) and status.finished == first
    assert texts(ada, "ada") == ["Lives in Paris"]
    known = ada.known_facts("ada")
    assert "Lives in Paris" in known.block and known.count == 1
    assert "total" in known.timing_ms
    hits = chat.search("ada", "Paris", k=3)
    assert [hit.fact.text for hit in hits.results] == ["Lives in Paris"]

    # Manual facts: add, correct, pin, unpin, chain, remove.
    tea = ada.add_fact("ada", "Likes green tea", category="preference", importance=4)
    assert (tea.source_kind, tea.category, tea.pinned) == ("manual", "preference", False)
    jasmine = ada.edit_fact("ada", tea.id, "Likes jasmine tea")
    assert jasmine.id != tea.id and jasmine.category == "preference"
    assert ada.pin_fact("ada", jasmine.id).pinned
    assert not ada.unpin_fact("ada", jasmine.id).pinned
    chain = chat.fact_chain("ada", tea.id)
    assert [(v.text, v.superseded_reason) for v in chain.versions] == [
        ("Likes green tea", "updated"), ("Likes jasmine tea", None)]
    removed = chat.remove_fact("ada", jasmine.id)
    assert removed.superseded_reason == "removed"
    with pytest.raises(WriteConflict, match=re.escape(
            f"edit_fact on {api_url}: 409 the fact is no longer active")):
        ada.edit_fact("ada", jasmine.id, "Likes black tea")
    with pytest.raises(NotFound, match=re.escape(f"fact_chain on {api_url}: 404 no such fact")):
        ada.fact_chain("ada", 10**12)

    # A pinned fact's change is held for the user: accept one, dismiss the next.
    paris = ada.facts("ada").facts[0]
    assert chat.pin_fact("ada", paris.id).pinned
    say(chat, "ada", "s2", "I moved to Lisbon.")
    assert texts(ada, "ada") == ["Lives in Paris"], "the pinned fact stands"
    (move,) = ada.held_proposals("ada")
    assert (move.fact_id, move.event, move.reason, move.text, move.stale) == (
        paris.id, "UPDATE", "pinned", "Lives in Lisbon", False)
    accepted = ada.accept_proposal("ada", move.id)
    assert accepted.proposal.resolution == "accepted" and accepted.fact is not None
    assert (accepted.fact.text, accepted.fact.pinned) == ("Lives in Lisbon", True)
    with pytest.raises(WriteConflict, match="already answered"):
        chat.accept_proposal("ada", move.id)
    say(chat, "ada", "s3", "I moved to Porto.")
    (porto,) = chat.held_proposals("ada")
    dismissed = chat.dismiss_proposal("ada", porto.id)
    assert (dismissed.proposal.resolution, dismissed.fact) == ("dismissed", None)
    assert dismissed.proposal.resolved_by is not None
    assert dismissed.proposal.resolved_by.startswith("key:")
    assert [p.resolution for p in ada.held_proposals("ada", "all")] == ["accepted", "dismissed"]
    assert texts(ada, "ada") == ["Lives in Lisbon"]

    # The commit events, from the oldest kept, and resumed after the first one.
    events = chat.memory_events(after="0", stop_after_s=WAIT_S)
    oldest = next(events)
    events.close()
    assert (oldest.session, oldest.handover, oldest.outcome) == (
        before.session_tag, first, "committed")
    resumed = chat.memory_events(after=oldest.id, stop_after_s=WAIT_S)
    following = next(resumed)
    resumed.close()
    assert following.id != oldest.id
    assert following.session == session_tag("s2", "ada", ID_KEY)

    # Everything held, for the user's right of access.
    export = chat.export("ada")
    assert export.user_id == "ada" and export.consent.enabled
    assert {"Lives in Paris", "Lives in Lisbon", "Likes green tea"} <= {
        f.text for f in export.facts}
    assert len(export.held_proposals) == 2 and export.document["user_id"] == "ada"

    # Memory off: nothing in prompts, nothing learned; then forgotten.
    assert ada.consent("ada").enabled
    off = ada.set_consent("ada", False)
    assert (off.enabled, off.chosen, off.deleted) == (False, True, None)
    assert ada.known_facts("ada").block == ""
    say(chat, "ada", "s4", "I use Rust.")
    assert texts(ada, "ada") == ["Lives in Lisbon"], "nothing learned while off"
    forgotten = chat.set_consent("ada", False, forget=True)
    assert forgotten.deleted is not None and forgotten.deleted["memory_fact"] >= 4
    assert ada.facts("ada").count == 0

    # The erase.
    say(chat, "bob", "s1", "I use Go.")
    assert texts(chat, "bob") == ["Uses Go"]
    erased = chat.erase_user("bob")
    assert erased.user_id == "bob" and erased.deleted["memory_fact"] == 1
    assert chat.facts("bob").count == 0
    chat.close()
    ada.close()


async def test_refusals_are_the_errors_of_worker_errors_naming_operation_and_host(
    api_url: str, keys: ServiceKeyStore, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    read_key = await new_key(keys, "read")
    reader = MemoryApi(api_url, service_key=read_key)
    assert read_key not in repr(reader) and read_key not in str(reader)
    assert reader.facts("ada").count == 0

    # A key without the scope; another user's memory with a user's token.
    with pytest.raises(AccessDenied, match="lacks the admin scope") as no_scope:
        reader.add_fact("ada", "Likes tea")
    assert no_scope.value.status == 403
    with pytest.raises(AccessDenied, match="lacks the handover scope"):
        reader.hand_over(user_id="ada", session_id="s1", messages=[user_msg("hi")])
    ada = MemoryApi(api_url, token=token("ada"))
    for read_bob in (lambda: ada.facts("bob"), lambda: ada.known_facts("bob"),
                     lambda: ada.memory_status(user_id="bob", session_id="s1"),
                     lambda: ada.erase_user("bob")):
        with pytest.raises(AccessDenied, match="403 the token is not for this user"):
            read_bob()
    with pytest.raises(AccessDenied, match="an end user's token cannot hand over"):
        ada.hand_over(user_id="ada", session_id="s1", messages=[user_msg("hi")])
    with pytest.raises(AccessDenied, match="401"):
        MemoryApi(api_url, service_key="mfk_0123456789ab_" + "0" * 64).facts("ada")

    # The hand-over's own refusals, and the API's checks of a call's arguments.
    chat = MemoryApi(api_url, service_key=await new_key(keys, "handover"))
    with pytest.raises(InvalidHandover, match="400 message 0: content is empty") as invalid:
        chat.hand_over(user_id="ada", session_id="s1", messages=[user_msg("")])
    assert invalid.value.status == 400
    with pytest.raises(InvalidRequest, match=re.escape(f"search on {api_url}: 422 query.k")):
        reader.search("ada", "tea", k=1000)

    # An API that does not answer: the host and the operation, never the key.
    port = free_port()
    gone = MemoryApi(f"http://127.0.0.1:{port}", service_key=read_key, timeout_s=2)
    with pytest.raises(MemoryApiUnavailable) as down:
        gone.facts("ada")
    assert f"facts on http://127.0.0.1:{port}: the memory API could not be reached" in str(
        down.value)
    with pytest.raises(HandoverUnavailable, match=f"hand_over on http://127.0.0.1:{port}"):
        MemoryApi(f"http://127.0.0.1:{port}", service_key=read_key).hand_over(
            user_id="ada", session_id="s1", messages=[user_msg("I live in Berlin.")])
    for error in (no_scope.value, invalid.value, down.value):
        shown = "".join(traceback.format_exception(error))
        assert read_key not in shown and "Berlin" not in shown
    assert read_key not in caplog.text
    for client in (reader, ada, chat, gone):
        client.close()
