"""The memory API's routes as Calls (docs/api.md, "Endpoints"), one function each,
shared by MemoryApi and AsyncMemoryApi: the path, the query, the body, and how the
answer is read. Ids are checked for emptiness and percent-encoded; everything else
is the API's to check (its refusals are the client's errors)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import Any, Literal

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
    WaitOutcome,
    server_timing,
)
from worker.client.memory_api_wire import Call, fact_number, segment
from worker.errors import InvalidHandover

MAX_WAIT_S = 30.0  # the wait route's own bound on one long poll
WAIT_MARGIN_S = 5.0  # a long poll's answer may take this much past its timeout_s
EXPORT_TIMEOUT_S = 130.0  # the API reads an export for at most 120 s, then sends it


class Keep(Enum):
    """An edit's member left out: the old version's value is kept."""

    KEEP = "keep"


KEEP = Keep.KEEP
Kept = Literal[Keep.KEEP]


def _query(**values: Any) -> dict[str, str]:
    query: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        query[name] = value.isoformat() if isinstance(value, datetime) else str(value)
    return query


def _user(user_id: str) -> str:
    return f"/users/{segment(user_id, 'user_id')}"


def _fact(user_id: str, fact_id: int) -> str:
    return f"{_user(user_id)}/facts/{fact_number(fact_id)}"


def _moment(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def facts(user_id: str, scope: ReadScope | None, agent_id: str | None,
          valid_at: datetime | None, known_at: datetime | None) -> Call[ActiveFacts]:
    return Call("facts", "GET", f"{_user(user_id)}/facts", lambda r: ActiveFacts.parse(r.json()),
                params=_query(scope=scope, agent_id=agent_id, valid_at=valid_at,
                              known_at=known_at))


def add_fact(user_id: str, text: str, *, category: str | None, importance: int | None,
             scope: str | None, agent_id: str | None, valid_from: datetime | None,
             valid_to: datetime | None, expires_at: datetime | None,
             pinned: bool | None, via: str | None = None,
             if_memory_on: bool | None = None) -> Call[Fact]:
    body: dict[str, Any] = {"text": text}
    given = {"category": category, "importance": importance, "scope": scope,
             "agent_id": agent_id, "valid_from": _moment(valid_from),
             "valid_to": _moment(valid_to), "expires_at": _moment(expires_at),
             "pinned": pinned, "via": via, "if_memory_on": if_memory_on}
    body.update({name: value for name, value in given.items() if value is not None})
    return Call("add_fact", "POST", f"{_user(user_id)}/facts", lambda r: Fact.parse(r.json()),
                body=body)


def edit_fact(user_id: str, fact_id: int, text: str, *, category: str | None,
              importance: int | None, valid_from: datetime | None,
              valid_to: datetime | Kept | None, expires_at: datetime | Kept | None,
              via: str | None = None) -> Call[Fact]:
    body: dict[str, Any] = {"text": text}
    if via is not None:
        body["via"] = via
    if category is not None:
        body["category"] = category
    if importance is not None:
        body["importance"] = importance
    if valid_from is not None:
        body["valid_from"] = valid_from.isoformat()
    # A merge patch: null clears valid_to and expires_at, leaving them out keeps them.
    if not isinstance(valid_to, Keep):
        body["valid_to"] = _moment(valid_to)
    if not isinstance(expires_at, Keep):
        body["expires_at"] = _moment(expires_at)
    return Call("edit_fact", "PATCH", _fact(user_id, fact_id), lambda r: Fact.parse(r.json()),
                body=body)


def remove_fact(user_id: str, fact_id: int) -> Call[Fact]:
    return Call("remove_fact", "DELETE", _fact(user_id, fact_id),
                lambda r: Fact.parse(r.json()))


def pin_fact(user_id: str, fact_id: int, pinned: bool) -> Call[Fact]:
    return Call("pin_fact" if pinned else "unpin_fact", "PUT" if pinned else "DELETE",
                f"{_fact(user_id, fact_id)}/pin", lambda r: Fact.parse(r.json()))


def fact_chain(user_id: str, fact_id: int) -> Call[Chain]:
    return Call("fact_chain", "GET", f"{_fact(user_id, fact_id)}/chain",
                lambda r: Chain.parse(r.json()))


def held_proposals(user_id: str, state: ProposalState) -> Call[list[HeldProposal]]:
    return Call("held_proposals", "GET", f"{_user(user_id)}/held-proposals",
                lambda r: HeldProposal.parse_list(r.json()), params=_query(state=state))


def answer_proposal(user_id: str, proposal_id: int, answer: Literal["accept", "dismiss"]
                    ) -> Call[HeldAnswer]:
    number = fact_number(proposal_id, "proposal_id")
    return Call(f"{answer}_proposal", "POST",
                f"{_user(user_id)}/held-proposals/{number}/{answer}",
                lambda r: HeldAnswer.parse(r.json()))


def search(user_id: str, q: str, *, k: int, scope: ReadScope | None, agent_id: str | None,
           valid_at: datetime | None, known_at: datetime | None) -> Call[SearchResults]:
    return Call("search", "GET", f"{_user(user_id)}/search",
                lambda r: SearchResults.parse(r.json(),
                                              server_timing(r.headers.get("server-timing"))),
                params=_query(q=q, k=k, scope=scope, agent_id=agent_id, valid_at=valid_at,
                              known_at=known_at))


def known_facts(user_id: str, q: str | None, scope: ReadScope | None,
                agent_id: str | None) -> Call[KnownFacts]:
    return Call("known_facts", "GET", f"{_user(user_id)}/known-facts",
                lambda r: KnownFacts.parse(r.json(),
                                           server_timing(r.headers.get("server-timing"))),
                params=_query(q=q, scope=scope, agent_id=agent_id))


def erase_user(user_id: str) -> Call[Erased]:
    return Call("erase_user", "DELETE", _user(user_id), lambda r: Erased.parse(r.json()))


def export(user_id: str, timeout_s: float) -> Call[Export]:
    return Call("export", "GET", f"{_user(user_id)}/export", lambda r: Export.parse(r.json()),
                timeout_s=max(timeout_s, EXPORT_TIMEOUT_S))


def consent(user_id: str) -> Call[Consent]:
    return Call("consent", "GET", f"{_user(user_id)}/consent", lambda r: Consent.parse(r.json()))


def set_consent(user_id: str, enabled: bool, forget: bool) -> Call[Consent]:
    body: dict[str, Any] = {"enabled": enabled}
    if forget:
        body["forget"] = True
    return Call("set_consent", "PUT", f"{_user(user_id)}/consent",
                lambda r: Consent.parse(r.json()), body=body)


def _session(user_id: str, session_id: str, error: type[ValueError] = ValueError) -> str:
    return (f"/users/{segment(user_id, 'user_id', error)}"
            f"/sessions/{segment(session_id, 'session_id', error)}")


def hand_over(user_id: str, session_id: str, messages: Sequence[Any], *,
              agent_id: str | None, listed_at_us: int | None) -> Call[HandedOver]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidHandover("messages is not a list")
    body: dict[str, Any] = {"messages": list(messages)}
    if agent_id is not None:
        body["agent_id"] = agent_id
    if listed_at_us is not None:
        body["listed_at_us"] = listed_at_us
    return Call("hand_over", "POST", f"{_session(user_id, session_id, InvalidHandover)}/handover",
                lambda r: HandedOver.parse(r.json()), body=body, handover=True)


def memory_status(user_id: str, session_id: str) -> Call[SessionStatus]:
    return Call("memory_status", "GET", f"{_session(user_id, session_id)}/status",
                lambda r: SessionStatus.parse(r.json()))


def wait_once(user_id: str, session_id: str, handover_id: int,
              poll_s: float) -> Call[WaitOutcome]:
    """One long poll of at most MAX_WAIT_S, bounded by its own time plus a margin."""
    poll_s = min(max(poll_s, 0.001), MAX_WAIT_S)
    number = fact_number(handover_id, "handover_id")
    return Call("wait_for_memory", "GET",
                f"{_session(user_id, session_id)}/handovers/{number}/wait",
                lambda r: WaitOutcome.parse(r.json()), params={"timeout_s": f"{poll_s:.3f}"},
                timeout_s=poll_s + WAIT_MARGIN_S)


def events(last_event_id: str | None) -> Call[None]:
    """``GET /events``, after ``last_event_id`` (sent as Last-Event-ID; "0": from the
    oldest event kept; None: the events that come after the request)."""
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    return Call("memory_events", "GET", "/events", lambda r: None, headers=headers)


def healthz() -> Call[bool]:
    return Call("healthz", "GET", "/healthz", lambda r: r.json().get("status") == "ok")


def readyz() -> Call[Readiness]:
    return Call("readyz", "GET", "/readyz", lambda r: Readiness.parse(r.json()), answers=(503,))
