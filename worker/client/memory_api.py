"""The memory API's Python client (httpx): every route of docs/api.md, for a chat
server that holds no Redis credentials. ``MemoryApi`` blocks; ``AsyncMemoryApi``
(worker.client.memory_api_async) is the same for asyncio. docs/python_client.md is
the guide.

    with MemoryApi("http://memory.internal:8088", service_key=KEY) as api:
        handed = api.hand_over(user_id="ada", session_id="s1", messages=messages)
        api.wait_for_memory(user_id="ada", session_id="s1",
                            handover_id=handed.handover_id, timeout_s=5)
        block = api.known_facts("ada").block

Credentials: a service key (``service_key=``; its scopes decide the routes) or an
end user's token (``token=``: a JWT, or a function that mints one per request),
never shown in repr, str, errors or logs. Each call is bounded by ``timeout_s``
(``connect_timeout_s`` to connect); the export by at least 130 s, a wait by its
own time plus 5 s. Reads (GET) the API did not answer, or answered 502/503/504, are
tried again ``retries`` times after a pause of at most a second within the call's
time; writes never are. Errors: worker.errors (docs/python_client.md has the table).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
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
from worker.client.memory_api_wire import (
    Call,
    SseParser,
    error_for,
    unreachable,
)
from worker.errors import LongPollRefused, MemfleetError, MemoryApiUnavailable
from worker.protocol.events import CommitEvent

log = logging.getLogger("memfleet.client.memory_api")

T = TypeVar("T")


class MemoryApi(ClientBase):
    """The memory API over HTTP, blocking. One instance per API and credential, shared
    by the threads of a chat server (httpx keeps its connections); ``close()`` or
    ``with`` ends it. ``transport`` is for tests (httpx.MockTransport)."""

    def __init__(self, url: str, *, service_key: str | None = None,
                 token: str | Callable[[], str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S, retries: int = 1,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(url, service_key=service_key, token=token, timeout_s=timeout_s,
                         connect_timeout_s=connect_timeout_s, retries=retries)
        self._http = httpx.Client(base_url=self.endpoint.base, auth=self.credential,
                                  transport=transport, follow_redirects=False,
                                  headers={"User-Agent": USER_AGENT})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryApi:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _send(self, call: Call[T]) -> T:
        deadline = time.monotonic() + (call.timeout_s or self.timeout_s)
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method, call.path, params=call.params, json=call.body,
                    headers=call.headers, timeout=self._timeout(deadline - time.monotonic()))
            except httpx.RequestError as exc:
                error = unreachable(call, self.host, exc)
            else:
                try:
                    return self._answer(call, response)
                except MemfleetError as refused:
                    error = refused
            pause = self._retry(call, error, attempt, deadline)
            if pause is None:
                raise error from None
            time.sleep(pause)
            attempt += 1

    # Facts -------------------------------------------------------------------------

    def facts(self, user_id: str, *, scope: ReadScope | None = None,
              agent_id: str | None = None, valid_at: datetime | None = None,
              known_at: datetime | None = None) -> ActiveFacts:
        """The user's active facts (or what was true at ``valid_at``, or believed at
        ``known_at``), grouped by category. Scope ``read``."""
        return self._send(routes.facts(user_id, scope, agent_id, valid_at, known_at))

    def add_fact(self, user_id: str, text: str, *, category: str | None = None,
                 importance: int | None = None, scope: str | None = None,
                 agent_id: str | None = None, valid_from: datetime | None = None,
                 valid_to: datetime | None = None, expires_at: datetime | None = None,
                 pinned: bool | None = None, via: Via | None = None,
                 if_memory_on: bool | None = None) -> Fact:
        """Add a fact by hand (the API's defaults for what is left out; ``via``: how it
        was written, api when left out). Scope ``admin``. ``if_memory_on``: only while
        the user's memory is on, checked in the write's own transaction: else MemoryOff
        and nothing stored."""
        return self._send(routes.add_fact(
            user_id, text, category=category, importance=importance, scope=scope,
            agent_id=agent_id, valid_from=valid_from, valid_to=valid_to,
            expires_at=expires_at, pinned=pinned, via=via,
            if_memory_on=if_memory_on))

    def edit_fact(self, user_id: str, fact_id: int, text: str, *, category: str | None = None,
                  importance: int | None = None, valid_from: datetime | None = None,
                  valid_to: datetime | Kept | None = KEEP,
                  expires_at: datetime | Kept | None = KEEP, via: Via | None = None) -> Fact:
        """Correct a fact (PATCH): the version is superseded by ``text``; the new version
        is answered. Left out: the old version's value; ``valid_to=None`` or
        ``expires_at=None`` clears it. WriteConflict: no longer the active version."""
        return self._send(routes.edit_fact(
            user_id, fact_id, text, category=category, importance=importance,
            valid_from=valid_from, valid_to=valid_to, expires_at=expires_at, via=via))

    def remove_fact(self, user_id: str, fact_id: int) -> Fact:
        """Remove a fact: it is superseded, nothing is deleted. Scope ``admin``."""
        return self._send(routes.remove_fact(user_id, fact_id))

    def pin_fact(self, user_id: str, fact_id: int) -> Fact:
        """Pin: consolidation holds its changes to it for the user. Scope ``admin``."""
        return self._send(routes.pin_fact(user_id, fact_id, True))

    def unpin_fact(self, user_id: str, fact_id: int) -> Fact:
        return self._send(routes.pin_fact(user_id, fact_id, False))

    def fact_chain(self, user_id: str, fact_id: int) -> Chain:
        """Every version of the fact, oldest first. Scope ``read``."""
        return self._send(routes.fact_chain(user_id, fact_id))

    def held_proposals(self, user_id: str, state: ProposalState = "open") -> list[HeldProposal]:
        """The changes consolidation held: ``open``, ``resolved`` or ``all``. Scope ``read``."""
        return self._send(routes.held_proposals(user_id, state))

    def accept_proposal(self, user_id: str, proposal_id: int) -> HeldAnswer:
        """Apply a held change (WriteConflict when answered or stale). Scope ``admin``."""
        return self._send(routes.answer_proposal(user_id, proposal_id, "accept"))

    def dismiss_proposal(self, user_id: str, proposal_id: int) -> HeldAnswer:
        return self._send(routes.answer_proposal(user_id, proposal_id, "dismiss"))

    # Reading for a prompt ------------------------------------------------------------

    def notes(self, user_id: str, state: NoteState = "active") -> list[Note]:
        """The user's notes beside their facts (docs/notes.md): active, or every version.
        Scope ``read``."""
        return self._send(note_calls.notes(user_id, state))

    def remove_note(self, user_id: str, note_id: int) -> Note:
        """Supersede a note as removed (never deleted). Scope ``admin``; a manual write."""
        return self._send(note_calls.remove_note(user_id, note_id))

    def fact_notes(self, user_id: str, fact_id: int) -> list[Note]:
        """The notes the promotion job made the fact from. Scope ``read``."""
        return self._send(note_calls.fact_notes(user_id, fact_id))

    def search(self, user_id: str, q: str, *, k: int = 10, scope: ReadScope | None = None,
               agent_id: str | None = None, valid_at: datetime | None = None,
               known_at: datetime | None = None) -> SearchResults:
        """Hybrid search over the active facts. Scope ``read``."""
        return self._send(routes.search(user_id, q, k=k, scope=scope, agent_id=agent_id,
                                        valid_at=valid_at, known_at=known_at))

    def known_facts(self, user_id: str, q: str | None = None, *, scope: ReadScope | None = None,
                    agent_id: str | None = None) -> KnownFacts:
        """The system-prompt block (empty while the user's memory is off). Scope ``read``."""
        return self._send(routes.known_facts(user_id, q, scope, agent_id))

    def prompt_blocks(self, user_id: str, q: str | None = None, *,
                      agent_id: str | None = None) -> PromptBlocks:
        """The prompt split (docs/prompt.md): the stable block with its ``version`` (the
        cacheable prefix) and the volatile block for ``q``; both empty while the user's
        memory is off. Scope ``read``."""
        return self._send(prompt.prompt_blocks(user_id, q, agent_id))

    def stable_block(self, user_id: str, *, agent_id: str | None = None,
                     known_version: str | None = None) -> StableBlock | None:
        """The stable block alone; None when ``known_version`` is still its version (the
        API's 304 to If-None-Match): the cached prefix is still good. Scope ``read``."""
        return self._send(prompt.stable_block(user_id, agent_id, known_version))

    # The people in the user's life (docs/persons.md) ---------------------------------

    def persons(self, user_id: str, *, include_merged: bool = False) -> list[Person]:
        """The user's persons, each with the active facts about them. Scope ``read``."""
        return self._send(people.persons(user_id, include_merged))

    def create_person(self, user_id: str, *, display_name: str | None = None,
                      relation: str | None = None, aliases: list[str] | None = None) -> Person:
        """A person made by hand: a name, a relation, or both. Scope ``admin``."""
        return self._send(people.create_person(user_id, display_name, relation, aliases))

    def update_person(self, user_id: str, person_id: int, **changes: Any) -> Person:
        """Rename, relabel or set the aliases (``display_name``, ``relation``, ``aliases``;
        None clears): a new label version. Scope ``admin``."""
        return self._send(people.update_person(user_id, person_id, changes))

    def add_alias(self, user_id: str, person_id: int, alias: str) -> Person:
        """Another name the person goes by. Scope ``admin``."""
        return self._send(people.add_alias(user_id, person_id, alias))

    def merge_persons(self, user_id: str, person_id: int, into: int) -> Person:
        """Merge ``person_id`` into ``into`` (the one that stays, returned). Scope ``admin``."""
        return self._send(people.merge_persons(user_id, person_id, into))

    def move_fact(self, user_id: str, fact_id: int, person_id: int | None) -> Fact:
        """Say who a fact is about (None: the user): its new version. Scope ``admin``."""
        return self._send(people.move_fact(user_id, fact_id, person_id))

    # The user's portrait (docs/portrait.md) ------------------------------------------

    def portrait(self, user_id: str, *, known_tag: str | None = None) -> Portrait | None:
        """The user's portrait and its state; None when ``known_tag`` (a ``Portrait.tag``)
        is still current (the API's 304). Scope ``read``."""
        return self._send(portraits.portrait(user_id, known_tag))

    def remove_portrait(self, user_id: str) -> int | None:
        """Remove the portrait (the version that ended, or None); none is made until
        ``refresh_portrait``. Scope ``admin``."""
        return self._send(portraits.remove_portrait(user_id))

    def refresh_portrait(self, user_id: str) -> bool:
        """Ask for a portrait (again): whether a refresh was queued. Scope ``admin``."""
        return self._send(portraits.refresh_portrait(user_id))

    # The user's rights ---------------------------------------------------------------

    def erase_user(self, user_id: str) -> Erased:
        """Erase everything about the user. Scope ``admin``."""
        return self._send(routes.erase_user(user_id))

    def export(self, user_id: str) -> Export:
        """Everything held about the user. Scope ``admin``."""
        return self._send(routes.export(user_id, self.timeout_s))

    def consent(self, user_id: str) -> Consent:
        return self._send(routes.consent(user_id))

    def set_consent(self, user_id: str, enabled: bool, *, forget: bool = False) -> Consent:
        """Memory on or off; off with ``forget`` also erases (``deleted`` says what
        went). Scope ``admin``."""
        return self._send(routes.set_consent(user_id, enabled, forget))

    # The hand-over, status, wait and events -------------------------------------------

    def hand_over(self, *, user_id: str, session_id: str, messages: Sequence[Any],
                  agent_id: str | None = None, listed_at_us: int | None = None) -> HandedOver:
        """Hand the session's messages over (what ``schedule_memory_persistence`` does
        on Redis); a service key with the ``handover`` scope. Its refusals are the
        hand-over's errors; the API not answering is HandoverUnavailable."""
        return self._send(routes.hand_over(user_id, session_id, messages, agent_id=agent_id,
                                           listed_at_us=listed_at_us))

    def memory_status(self, *, user_id: str, session_id: str) -> SessionStatus:
        return self._send(routes.memory_status(user_id, session_id))

    def wait_for_memory(self, *, user_id: str, session_id: str, handover_id: int,
                        timeout_s: float = 10.0) -> WaitOutcome:
        """Wait until a commit covers the hand-over, at most ``timeout_s`` (long polls
        of at most 30 s each); ``covered`` False when the time passed first. A wait
        refused for want of a slot (LongPollRefused) is asked again after its
        Retry-After while the time allows."""
        deadline = time.monotonic() + wait_check(timeout_s)
        while True:
            try:
                outcome = self._send(routes.wait_once(user_id, session_id, handover_id,
                                                      deadline - time.monotonic()))
            except LongPollRefused as refused:
                pause = refused.retry_after_s if refused.retry_after_s is not None else 1.0
                if time.monotonic() + pause >= deadline:
                    raise
                time.sleep(pause)
                continue
            if outcome.covered or deadline - time.monotonic() < 0.01:
                return outcome

    def memory_events(self, *, after: str | None = None, stop_after_s: float | None = None,
                      reconnects: int = EVENTS_RECONNECTS) -> Iterator[CommitEvent]:
        """The commit events as they come (``GET /events``), after stream id ``after``
        ("0": the oldest kept; None: those after the call). A dropped stream is
        resumed with Last-Event-ID, missing and repeating nothing, up to ``reconnects``
        times in a row (MemoryApiUnavailable after); ``stop_after_s`` ends the
        iteration after about that long (checked at each line; a keep-alive comes
        every 15 s). A service key with the ``handover`` or ``read`` scope."""
        deadline = None if stop_after_s is None else time.monotonic() + stop_after_s
        last, failures = after, 0
        while True:
            call = routes.events(last)
            left = EVENTS_READ_TIMEOUT_S if deadline is None else deadline - time.monotonic()
            try:
                with self._http.stream("GET", call.path, headers=call.headers,
                                       timeout=self._timeout(min(left, EVENTS_READ_TIMEOUT_S))
                                       ) as response:
                    if not response.is_success:
                        response.read()
                        raise error_for(call, self.host, response)
                    parser = SseParser(self.host)
                    for line in response.iter_lines():
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
            time.sleep(pause)

    # Probes ---------------------------------------------------------------------------

    def healthz(self) -> bool:
        """The process answers (no credential needed, but the client sends its own)."""
        return self._send(routes.healthz())

    def readyz(self) -> Readiness:
        """Redis and PostgreSQL answer the API (503 is an answer here: ``ready`` False)."""
        return self._send(routes.readyz())
