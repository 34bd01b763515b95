"""AsyncMemoryApi against the real memory API over HTTP and a real `memfleet worker`
process committing through the LLM stub: a wait and an event stream follow the
worker's commit while the test goes on; every route through the client (facts by
scope, agent and time included); the long polls' bounds as TooManyLongPolls; and an
API that does not answer, named by host and operation."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import pytest

from tests.api_server import free_port, new_key, token
from tests.helpers import WorkerProcesses, bot_msg, user_msg
from tests.integration.api.conftest import ID_KEY
from worker.client import (
    AccessDenied,
    AsyncMemoryApi,
    HandoverUnavailable,
    MemoryApiUnavailable,
    TooManyLongPolls,
    session_tag,
)
from worker.client.memory_api_models import ReadScope
from worker.store.service_keys import ServiceKeyStore

WAIT_S = 60.0


async def say(chat: AsyncMemoryApi, user: str, session: str, text: str) -> int:
    handed = await chat.hand_over(user_id=user, session_id=session,
                                  messages=[user_msg(text), bot_msg("Noted.")])
    outcome = await chat.wait_for_memory(user_id=user, session_id=session,
                                         handover_id=handed.handover_id, timeout_s=WAIT_S)
    assert outcome.covered, outcome
    return handed.handover_id


async def texts(api: AsyncMemoryApi, user: str, *, scope: ReadScope | None = None,
                agent_id: str | None = None, valid_at: datetime | None = None,
                known_at: datetime | None = None) -> list[str]:
    facts = await api.facts(user, scope=scope, agent_id=agent_id, valid_at=valid_at,
                            known_at=known_at)
    return sorted(fact.text for fact in facts.facts)


async def test_every_route_through_the_async_client(
    api_url: str, keys: ServiceKeyStore, worker: WorkerProcesses,
) -> None:
    key = await new_key(keys, "handover", "read", "admin")
    async with AsyncMemoryApi(api_url, service_key=key, timeout_s=30) as chat, \
            AsyncMemoryApi(api_url, token=lambda: token("ada"), timeout_s=30) as ada, \
            contextlib.aclosing(chat.memory_events(after="0", stop_after_s=WAIT_S)) as events:
        assert await chat.healthz()
        assert (await chat.readyz()).ready
        # The stream and the wait are open while the worker commits.
        first_event = asyncio.create_task(anext(events))
        handed = await chat.hand_over(user_id="ada", session_id="s1",
                                      messages=[user_msg("I live in Paris."), bot_msg("Noted.")])
        waiting = asyncio.create_task(ada.wait_for_memory(
            user_id="ada", session_id="s1", handover_id=handed.handover_id, timeout_s=WAIT_S))
        outcome, event = await asyncio.gather(waiting, first_event)
        assert outcome.covered and outcome.finished == handed.handover_id
        assert (event.session, event.handover, event.outcome) == (
            session_tag("s1", "ada", ID_KEY), handed.handover_id, "committed")
        assert event.added == 1
        status = await chat.memory_status(user_id="ada", session_id="s1")
        assert status.session_tag == event.session and status.covers(handed.handover_id)

        assert await texts(ada, "ada") == ["Lives in Paris"]
        assert "Lives in Paris" in (await chat.known_facts("ada", "where?")).block
        assert [h.fact.text for h in (await ada.search("ada", "Paris")).results] == [
            "Lives in Paris"]

        # Scopes, agents and time.
        luna = await ada.add_fact("ada", "Calls the assistant Luna", scope="relationship",
                                  agent_id="luna", category="relationship")
        assert (luna.scope, luna.agent_id) == ("relationship", "luna")
        assert await texts(ada, "ada", scope="relationship", agent_id="luna") == [
            "Calls the assistant Luna"]
        assert await texts(ada, "ada", scope="profile") == ["Lives in Paris"]
        before_edit = datetime.now(UTC)
        await asyncio.sleep(0.05)
        edited = await ada.edit_fact("ada", luna.id, "Calls the assistant Luna Bee")
        assert await texts(ada, "ada", scope="relationship", agent_id="luna",
                           known_at=before_edit) == ["Calls the assistant Luna"]
        assert await texts(ada, "ada", scope="relationship", agent_id="luna",
                           valid_at=datetime.now(UTC)) == ["Calls the assistant Luna Bee"]
        assert [v.text for v in (await ada.fact_chain("ada", edited.id)).versions] == [
            "Calls the assistant Luna", "Calls the assistant Luna Bee"]
        assert (await ada.unpin_fact("ada", edited.id)).pinned is False
        assert (await chat.remove_fact("ada", edited.id)).superseded_at is not None

        # Held proposals: accept, then dismiss.
        paris = (await ada.facts("ada")).facts[0]
        assert (await ada.pin_fact("ada", paris.id)).pinned
        await say(chat, "ada", "s2", "I moved to Lisbon.")
        (move,) = await chat.held_proposals("ada")
        assert (move.event, move.reason, move.text) == ("UPDATE", "pinned", "Lives in Lisbon")
        assert (await chat.accept_proposal("ada", move.id)).fact is not None
        await say(chat, "ada", "s3", "I moved to Porto.")
        (porto,) = await ada.held_proposals("ada")
        assert (await ada.dismiss_proposal("ada", porto.id)).proposal.resolved_by == "user"
        assert await texts(ada, "ada") == ["Lives in Lisbon"]

        export = await ada.export("ada")
        assert len(export.held_proposals) == 2 and len(export.facts) >= 4

        # Consent: off (nothing learned, nothing in prompts), then forgotten; the erase.
        assert (await chat.set_consent("ada", False)).enabled is False
        assert (await ada.consent("ada")).chosen
        assert (await chat.known_facts("ada")).count == 0
        await say(chat, "ada", "s4", "I use Rust.")
        assert await texts(ada, "ada") == ["Lives in Lisbon"]
        forgotten = await ada.set_consent("ada", False, forget=True)
        assert forgotten.deleted and forgotten.deleted["memory_fact"] >= 4
        assert (await chat.facts("ada")).count == 0
        await say(chat, "bob", "s1", "I use Go.")
        assert (await chat.erase_user("bob")).deleted["memory_fact"] == 1


async def test_the_long_polls_bounds_and_an_api_away(
    api_url: str, keys: ServiceKeyStore,
) -> None:
    chat_key = await new_key(keys, "handover")
    async with AsyncMemoryApi(api_url, service_key=chat_key) as chat, \
            AsyncMemoryApi(api_url, token=token("ada")) as ada:
        handed = await chat.hand_over(user_id="ada", session_id="s1",
                                      messages=[user_msg("I live in Paris.")])
        # No worker runs: nothing covers it. A user's token holds 4 waits at once.
        held = [asyncio.create_task(ada.wait_for_memory(
            user_id="ada", session_id="s1", handover_id=handed.handover_id, timeout_s=3))
            for _ in range(4)]
        await asyncio.sleep(1.0)
        with pytest.raises(TooManyLongPolls, match="429") as refused:
            await ada.wait_for_memory(user_id="ada", session_id="s1",
                                      handover_id=handed.handover_id, timeout_s=1)
        assert refused.value.retry_after_s == 5.0
        assert [o.covered for o in await asyncio.gather(*held)] == [False] * 4
        with pytest.raises(AccessDenied, match="403 an end user's token cannot read the commit"):
            async with AsyncMemoryApi(api_url, token=token("ada")) as user:
                async for _ in user.memory_events(stop_after_s=1):
                    pass

    port = free_port()
    async with AsyncMemoryApi(f"http://127.0.0.1:{port}", service_key=chat_key) as gone:
        with pytest.raises(MemoryApiUnavailable) as down:
            await gone.memory_status(user_id="ada", session_id="s1")
        with pytest.raises(HandoverUnavailable) as handover_down:
            await gone.hand_over(user_id="ada", session_id="s1", messages=[user_msg("hi")])
    for error, operation in ((down.value, "memory_status"), (handover_down.value, "hand_over")):
        assert str(error).startswith(f"{operation} on http://127.0.0.1:{port}: the memory API "
                                     "could not be reached")
        assert chat_key not in str(error) and chat_key not in repr(error)
