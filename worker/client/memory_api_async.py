"""``AsyncMemoryApi``: worker.client.memory_api's MemoryApi for asyncio, the same
calls, answers, errors and bounds (each call's whole time is also held to its
bound by a timeout scope). docs/python_client.md is the guide.

    async with AsyncMemoryApi("http://memory.internal:8088", service_key=KEY) as api:
        block = (await api.known_facts("ada")).block

An event stream is an async generator: close it when done with it, e.g.
``async with contextlib.aclosing(api.memory_events()) as events: async for ...``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from worker.client import memory_api_notes as note_calls
from worker.client import memory_api_persons as people
from worker.client import memory_api_portrait as portraits
from worker.client import memory_api_prompt as prompt
from worker.client import memory_api_routes as routes
from worker.client.memory_api_base import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    EVENTS_READ_TIMEOUT_S,
    EVENTS_RECONNECTS,
    USER_AGENT,
    ClientBase,
    wait_check,
)
from worker.client.memory_api_models import (
    ActiveFacts,
    Chain,
    Consent,
    Erased,
    Export,
    Fact,
    HandedOver,
    HeldAnswer,
    HeldProposal,
    KnownFacts,
    ProposalState,
    Readiness,
    ReadScope,
    SearchResults,
    SessionStatus,
    Via,
    WaitOutcome,
)
from worker.client.memory_api_notes import Note, NoteState
from worker.client.memory_api_persons import Person
from worker.client.memory_api_portrait import Portrait
from worker.client.memory_api_prompt import PromptBlocks, StableBlock
from worker.client.memory_api_routes import KEEP, Kept
from worker.client.memory_api_wire import Call, SseParser, error_for, unreachable
from worker.errors import LongPollRefused, MemfleetError, MemoryApiUnavailable
from worker.protocol.events import CommitEvent

T = TypeVar("T")


class AsyncMemoryApi(ClientBase):
    """The memory API over HTTP, for asyncio; the methods are MemoryApi's (their
    docstrings there). One instance per API and credential, shared by the tasks of a
    chat server; ``await aclose()`` or ``async with`` ends it."""

    def __init__(self, url: str, *, service_key: str | None = None,
                 token: str | Callable[[], str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S, retries: int = 1,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(url, service_key=service_key, token=token, timeout_s=timeout_s,
                         connect_timeout_s=connect_timeout_s, retries=retries)
        self._http = httpx.AsyncClient(base_url=self.endpoint.base, auth=self.credential,
                                       transport=transport, follow_redirects=False,
                                       headers={"User-Agent": USER_AGENT})

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryApi:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    async def _send(self, call: Call[T]) -> T:
        deadline = time.monotonic() + (call.timeout_s or self.timeout_s)
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(left, 0.001)):
                    response = await self._http.request(
                        call.method, call.path, params=call.params, json=call.body,
                        headers=call.headers, timeout=self._timeout(left))
            except (httpx.RequestError, TimeoutError) as exc:
                error = unreachable(call, self.host, exc)
            else:
                try:
                    return self._answer(call, response)
                except MemfleetError as refused:
                    error = refused
            pause = self._retry(call, error, attempt, deadline)
            if pause is None:
                raise error from None
            await asyncio.sleep(pause)
            attempt += 1

    async def facts(self, user_id: str, *, scope: ReadScope | None = None,
                    agent_id: str | None = None, valid_at: datetime | None = None,
                    known_at: datetime | None = None) -> ActiveFacts:
        return await self._send(routes.facts(user_id, scope, agent_id, valid_at, known_at))

    async def add_fact(self, user_id: str, text: str, *, category: str | None = None,
                       importance: int | None = None, scope: str | None = None,
                       agent_id: str | None = None, valid_from: datetime | None = None,
                       valid_to: datetime | None = None, expires_at: datetime | None = None,
                       pinned: bool | None = None, via: Via | None = None,
                       if_memory_on: bool | None = None) -> Fact:
        return await self._send(routes.add_fact(
            user_id, text, category=category, importance=importance, scope=scope,
            agent_id=agent_id, valid_from=valid_from, valid_to=valid_to,
            expires_at=expires_at, pinned=pinned, via=via,
            if_memory_on=if_memory_on))

    async def edit_fact(self, user_id: str, fact_id: int, text: str, *,
                        category: str | None = None, importance: int | None = None,
                        valid_from: datetime | None = None,
                        valid_to: datetime | Kept | None = KEEP,
                        expires_at: datetime | Kept | None = KEEP, via: Via | None = None) -> Fact:
        return await self._send(routes.edit_fact(
            user_id, fact_id, text, category=category, importance=importance,
            valid_from=valid_from, valid_to=valid_to, expires_at=expires_at, via=via))

    async def remove_fact(self, user_id: str, fact_id: int) -> Fact:
        return await self._send(routes.remove_fact(user_id, fact_id))

    async def pin_fact(self, user_id: str, fact_id: int) -> Fact:
        return await self._send(routes.pin_fact(user_id, fact_id, True))

    async def unpin_fact(self, user_id: str, fact_id: int) -> Fact:
        return await self._send(routes.pin_fact(user_id, fact_id, False))

    async def fact_chain(self, user_id: str, fact_id: int) -> Chain:
        return await self._send(routes.fact_chain(user_id, fact_id))

    async def held_proposals(self, user_id: str,
                             state: ProposalState = "open") -> list[HeldProposal]:
        return await self._send(routes.held_proposals(user_id, state))

    async def accept_proposal(self, user_id: str, proposal_id: int) -> HeldAnswer:
        return await self._send(routes.answer_proposal(user_id, proposal_id, "accept"))

    async def dismiss_proposal(self, user_id: str, proposal_id: int) -> HeldAnswer:
        return await self._send(routes.answer_proposal(user_id, proposal_id, "dismiss"))

    async def notes(self, user_id: str, state: NoteState = "active") -> list[Note]:
        """As MemoryApi.notes."""
        return await self._send(note_calls.notes(user_id, state))

    async def remove_note(self, user_id: str, note_id: int) -> Note:
        """As MemoryApi.remove_note."""
        return await self._send(note_calls.remove_note(user_id, note_id))

    async def fact_notes(self, user_id: str, fact_id: int) -> list[Note]:
        """As MemoryApi.fact_notes."""
        return await self._send(note_calls.fact_notes(user_id, fact_id))

    async def search(self, user_id: str, q: str, *, k: int = 10,
                     scope: ReadScope | None = None, agent_id: str | None = None,
                     valid_at: datetime | None = None,
                     known_at: datetime | None = None) -> SearchResults:
        return await self._send(routes.search(user_id, q, k=k, scope=scope, agent_id=agent_id,
                                              valid_at=valid_at, known_at=known_at))

    async def known_facts(self, user_id: str, q: str | None = None, *,
                          scope: ReadScope | None = None,
                          agent_id: str | None = None) -> KnownFacts:
        return await self._send(routes.known_facts(user_id, q, scope, agent_id))

    async def prompt_blocks(self, user_id: str, q: str | None = None, *,
                            agent_id: str | None = None) -> PromptBlocks:
        return await self._send(prompt.prompt_blocks(user_id, q, agent_id))

    async def stable_block(self, user_id: str, *, agent_id: str | None = None,
                           known_version: str | None = None) -> StableBlock | None:
        return await self._send(prompt.stable_block(user_id, agent_id, known_version))

    async def persons(self, user_id: str, *, include_merged: bool = False) -> list[Person]:
        return await self._send(people.persons(user_id, include_merged))

    async def create_person(self, user_id: str, *, display_name: str | None = None,
                            relation: str | None = None,
                            aliases: list[str] | None = None) -> Person:
        return await self._send(people.create_person(user_id, display_name, relation, aliases))

    async def update_person(self, user_id: str, person_id: int, **changes: Any) -> Person:
        return await self._send(people.update_person(user_id, person_id, changes))

    async def add_alias(self, user_id: str, person_id: int, alias: str) -> Person:
        return await self._send(people.add_alias(user_id, person_id, alias))

    async def merge_persons(self, user_id: str, person_id: int, into: int) -> Person:
        return await self._send(people.merge_persons(user_id, person_id, into))

    async def move_fact(self, user_id: str, fact_id: int, person_id: int | None) -> Fact:
        return await self._send(people.move_fact(user_id, fact_id, person_id))

    async def portrait(self, user_id: str, *, known_tag: str | None = None) -> Portrait | None:
        return await self._send(portraits.portrait(user_id, known_tag))

    async def remove_portrait(self, user_id: str) -> int | None:
        return await self._send(portraits.remove_portrait(user_id))

    async def refresh_portrait(self, user_id: str) -> bool:
        return await self._send(portraits.refresh_portrait(user_id))

    async def erase_user(self, user_id: str) -> Erased:
        return await self._send(routes.erase_user(user_id))

    async def export(self, user_id: str) -> Export:
        return await self._send(routes.export(user_id, self.timeout_s))

    async def consent(self, user_id: str) -> Consent:
        return await self._send(routes.consent(user_id))

    async def set_consent(self, user_id: str, enabled: bool, *, forget: bool = False) -> Consent:
        return await self._send(routes.set_consent(user_id, enabled, forget))

    async def hand_over(self, *, user_id: str, session_id: str, messages: Sequence[Any],
                        agent_id: str | None = None,
                        listed_at_us: int | None = None) -> HandedOver:
        return await self._send(routes.hand_over(user_id, session_id, messages,
                                                 agent_id=agent_id, listed_at_us=listed_at_us))

    async def memory_status(self, *, user_id: str, session_id: str) -> SessionStatus:
        return await self._send(routes.memory_status(user_id, session_id))

    async def wait_for_memory(self, *, user_id: str, session_id: str, handover_id: int,
                              timeout_s: float = 10.0) -> WaitOutcome:
        deadline = time.monotonic() + wait_check(timeout_s)
        while True:
            try:
                outcome = await self._send(routes.wait_once(user_id, session_id, handover_id,
                                                            deadline - time.monotonic()))
            except LongPollRefused as refused:
                pause = refused.retry_after_s if refused.retry_after_s is not None else 1.0
                if time.monotonic() + pause >= deadline:
                    raise
                await asyncio.sleep(pause)
                continue
            if outcome.covered or deadline - time.monotonic() < 0.01:
                return outcome

    async def memory_events(self, *, after: str | None = None,
                            stop_after_s: float | None = None,
                            reconnects: int = EVENTS_RECONNECTS) -> AsyncIterator[CommitEvent]:
        deadline = None if stop_after_s is None else time.monotonic() + stop_after_s
        last, failures = after, 0
        while True:
            call = routes.events(last)
            left = EVENTS_READ_TIMEOUT_S if deadline is None else deadline - time.monotonic()
            try:
                async with self._http.stream(
                        "GET", call.path, headers=call.headers,
                        timeout=self._timeout(min(left, EVENTS_READ_TIMEOUT_S))) as response:
                    if not response.is_success:
                        await response.aread()
                        raise error_for(call, self.host, response)
                    parser = SseParser(self.host)
                    async for line in response.aiter_lines():
                        event = parser.feed(line)
                        if event is not None:
                            last, failures = event.id, 0
                            yield event
                        if deadline is not None and time.monotonic() >= deadline:
                            return
                error: MemfleetError = MemoryApiUnavailable(
                    f"memory_events on {self.host}: the stream ended")
            except httpx.RequestError as exc:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                error = unreachable(call, self.host, exc)
            except MemfleetError as refused:
                error = refused
            failures += 1
            pause = self._reconnect_pause(error, failures, reconnects, deadline)
            if pause is None:
                return
            await asyncio.sleep(pause)

    async def healthz(self) -> bool:
        return await self._send(routes.healthz())

    async def readyz(self) -> Readiness:
        return await self._send(routes.readyz())
