"""The memory API clients' requests and their handling, against httpx's MockTransport:
each method sends its route's method, path, query and body (docs/api.md) with the
credential in the header only; reads are tried again once and writes never; a wait
longer than the route's 30 s is several long polls, a refused one asked again after
Retry-After; a dropped event stream resumes with Last-Event-ID. The answers'
types mirror the server's models field by field."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from worker.api import memory_models, panel_models, session_routes
from worker.client import AsyncMemoryApi, MemoryApi
from worker.client import memory_api_models as models
from worker.errors import (
    ConfigurationError,
    HandoverUnavailable,
    InvalidHandover,
    MemoryApiError,
    MemoryApiUnavailable,
    TooManyLongPolls,
)

KEY = "mfk_0123456789ab_" + "cd" * 32
URL = "http://memory.test:8088/prefix"
NOW = "2026-11-22T10:00:00+00:00"
FACT = {"id": 7, "user_id": "ada", "text": "Lives in Berlin", "category": "fact",
        "importance": 6, "observed_at": NOW, "source_kind": "extracted",
        "source_session_id": "s1", "superseded_at": None, "superseded_by": None,
        "created_at": NOW, "scope": "profile", "agent_id": None, "valid_from": NOW,
        "valid_to": None, "expires_at": None, "pinned": False, "basis": "stated",
        "confidence": 0.9, "superseded_reason": None, "embedding_model": "m",
        "embedding_dim": 256, "a_field_of_a_newer_api": 1}
PROPOSAL = {"id": 3, "fact_id": 7, "run_id": 1, "event": "UPDATE", "reason": "pinned",
            "text": "Lives in Lisbon", "session_id": "s2", "proposed_at": NOW, "stale": False}
STATUS = {"latest": 2, "finished": 1, "older_lists": 0, "session_tag": None}

Sent = list[httpx.Request]


def mock(answer: Callable[[httpx.Request], httpx.Response]) -> tuple[Sent, httpx.MockTransport]:
    sent: Sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answer(request)

    return sent, httpx.MockTransport(handler)


def body_for(request: httpx.Request) -> Any:
    path = request.url.path
    if path.endswith("/facts") and request.method == "GET":
        return {"user_id": "ada", "count": 1, "groups": [{"category": "fact", "facts": [FACT]}]}
    if path.endswith("/chain"):
        return {"fact_id": 7, "versions": [FACT]}
    if path.endswith("/held-proposals"):
        return {"proposals": [PROPOSAL]}
    if path.endswith(("/accept", "/dismiss")):
        return {"proposal": {**PROPOSAL, "resolution": "accepted"}, "fact": FACT}
    if path.endswith("/search"):
        return {"results": [{"fact": FACT, "score": 0.03, "semantic_rank": 1,
                             "lexical_rank": None}]}
    if path.endswith("/known-facts"):
        return {"block": "- Lives in Berlin", "count": 1}
    if path.endswith("/consent"):
        return {"enabled": False, "chosen": True, "deleted": None}
    if path.endswith("/export"):
        return {"user_id": "ada", "exported_at": NOW,
                "consent": {"enabled": True, "chosen": False, "updated_at": None},
                "facts": [FACT], "sessions": [], "runs": [], "held_proposals": [PROPOSAL]}
    if path.endswith("/handover"):
        return {"handover_id": 2}
    if path.endswith("/status"):
        return STATUS
    if path.endswith("/wait"):
        return {"covered": True, "latest": 2, "finished": 2, "older_lists": 0}
    if path.endswith(("/healthz", "/readyz")):
        return {"status": "ok"}
    if path == "/prefix/users/ada" and request.method == "DELETE":
        return {"user_id": "ada", "deleted": {"memory_fact": 3}}
    return FACT


def answered(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=body_for(request),
                          headers={"Server-Timing": "store;dur=1.5, total;dur=2"})


WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
# (method call, HTTP method, path under /prefix, query, body, answer's type)
CALLS: list[tuple[Callable[[Any], Any], str, str, dict[str, str], Any, type]] = [
    (lambda a: a.facts("ada"), "GET", "/users/ada/facts", {}, None, models.ActiveFacts),
    (lambda a: a.facts("ada", scope="both", agent_id="luna", valid_at=WHEN), "GET",
     "/users/ada/facts", {"scope": "both", "agent_id": "luna",
                          "valid_at": "2026-01-02T03:04:05+00:00"}, None, models.ActiveFacts),
    (lambda a: a.facts("a/b c", known_at=WHEN), "GET", "/users/a%2Fb%20c/facts",
     {"known_at": "2026-01-02T03:04:05+00:00"}, None, models.ActiveFacts),
    (lambda a: a.add_fact("ada", "Likes tea"), "POST", "/users/ada/facts", {},
     {"text": "Likes tea"}, models.Fact),
    (lambda a: a.add_fact("ada", "Calls me Ada", category="relationship", importance=7,
                          scope="relationship", agent_id="luna", pinned=True,
                          valid_to=WHEN), "POST", "/users/ada/facts", {},
     {"text": "Calls me Ada", "category": "relationship", "importance": 7,
      "scope": "relationship", "agent_id": "luna", "pinned": True,
      "valid_to": "2026-01-02T03:04:05+00:00"}, models.Fact),
    (lambda a: a.edit_fact("ada", 7, "Lives in Bonn"), "PATCH", "/users/ada/facts/7", {},
     {"text": "Lives in Bonn"}, models.Fact),
    (lambda a: a.edit_fact("ada", 7, "Lives in Bonn", importance=8, valid_to=None),
     "PATCH", "/users/ada/facts/7", {}, {"text": "Lives in Bonn", "importance": 8,
                                        "valid_to": None}, models.Fact),
    (lambda a: a.remove_fact("ada", 7), "DELETE", "/users/ada/facts/7", {}, None, models.Fact),
    (lambda a: a.pin_fact("ada", 7), "PUT", "/users/ada/facts/7/pin", {}, None, models.Fact),
    (lambda a: a.unpin_fact("ada", 7), "DELETE", "/users/ada/facts/7/pin", {}, None,
     models.Fact),
    (lambda a: a.fact_chain("ada", 7), "GET", "/users/ada/facts/7/chain", {}, None,
     models.Chain),
    (lambda a: a.held_proposals("ada", "all"), "GET", "/users/ada/held-proposals",
     {"state": "all"}, None, list),
    (lambda a: a.accept_proposal("ada", 3), "POST", "/users/ada/held-proposals/3/accept", {},
     None, models.HeldAnswer),
    (lambda a: a.dismiss_proposal("ada", 3), "POST", "/users/ada/held-proposals/3/dismiss",
     {}, None, models.HeldAnswer),
    (lambda a: a.search("ada", "where do I live?", k=3, agent_id="luna"), "GET",
     "/users/ada/search", {"q": "where do I live?", "k": "3", "agent_id": "luna"}, None,
     models.SearchResults),
    (lambda a: a.known_facts("ada"), "GET", "/users/ada/known-facts", {}, None,
     models.KnownFacts),
    (lambda a: a.known_facts("ada", "trip", scope="profile"), "GET", "/users/ada/known-facts",
     {"q": "trip", "scope": "profile"}, None, models.KnownFacts),
    (lambda a: a.erase_user("ada"), "DELETE", "/users/ada", {}, None, models.Erased),
    (lambda a: a.export("ada"), "GET", "/users/ada/export", {}, None, models.Export),
    (lambda a: a.consent("ada"), "GET", "/users/ada/consent", {}, None, models.Consent),
    (lambda a: a.set_consent("ada", False, forget=True), "PUT", "/users/ada/consent", {},
     {"enabled": False, "forget": True}, models.Consent),
    (lambda a: a.hand_over(user_id="ada", session_id="s1",
                           messages=[{"role": "user", "content": "hi"}], agent_id="luna"),
     "POST", "/users/ada/sessions/s1/handover", {},
     {"messages": [{"role": "user", "content": "hi"}], "agent_id": "luna"}, models.HandedOver),
    (lambda a: a.memory_status(user_id="ada", session_id="s1"), "GET",
     "/users/ada/sessions/s1/status", {}, None, models.SessionStatus),
    (lambda a: a.wait_for_memory(user_id="ada", session_id="s1", handover_id=2, timeout_s=5),
     "GET", "/users/ada/sessions/s1/handovers/2/wait", {"timeout_s": "5.000"}, None,
     models.WaitOutcome),
    (lambda a: a.healthz(), "GET", "/healthz", {}, None, bool),
    (lambda a: a.readyz(), "GET", "/readyz", {}, None, models.Readiness),
]


def check_sent(request: httpx.Request, method: str, path: str, query: dict[str, str],
               body: Any) -> None:
    assert request.method == method
    assert request.url.raw_path.decode().split("?")[0] == "/prefix" + path
    assert dict(request.url.params) == query
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in str(request.url)
    assert (json.loads(request.content) if request.content else None) == body


@pytest.mark.parametrize(("call", "method", "path", "query", "body", "kind"), CALLS)
def test_each_method_sends_its_route(call: Callable[[Any], Any], method: str, path: str,
                                     query: dict[str, str], body: Any, kind: type) -> None:
    sent, transport = mock(answered)
    with MemoryApi(URL, service_key=KEY, transport=transport) as api:
        result = call(api)
    assert isinstance(result, kind)
    (request,) = sent
    check_sent(request, method, path, query, body)


@pytest.mark.parametrize(("call", "method", "path", "query", "body", "kind"), CALLS)
async def test_each_async_method_sends_its_route(
    call: Callable[[Any], Any], method: str, path: str, query: dict[str, str], body: Any,
    kind: type,
) -> None:
    sent, transport = mock(answered)
    async with AsyncMemoryApi(URL, service_key=KEY, transport=transport) as api:
        result = await call(api)
    assert isinstance(result, kind)
    (request,) = sent
    check_sent(request, method, path, query, body)


def test_the_answers_are_typed() -> None:
    _, transport = mock(answered)
    with MemoryApi(URL, service_key=KEY, transport=transport) as api:
        facts = api.facts("ada")
        assert facts.facts[0].observed_at == datetime(2026, 11, 22, 10, tzinfo=UTC)
        assert facts.facts[0].embedding_dim == 256
        known = api.known_facts("ada")
        assert known.timing_ms == {"store": 1.5, "total": 2.0}
        (proposal,) = api.held_proposals("ada")
        assert (proposal.event, proposal.reason, proposal.stale) == ("UPDATE", "pinned", False)
        assert proposal.person_id is None, "an older server's answer, without it, parses"
        addition = models.HeldProposal.parse({**PROPOSAL, "fact_id": None, "event": "ADD",
                                              "reason": "undecided", "person_id": 4})
        assert (addition.fact_id, addition.person_id) == (None, 4)
        export = api.export("ada")
        assert export.facts[0].text == "Lives in Berlin" and export.document["user_id"] == "ada"
        status = api.memory_status(user_id="ada", session_id="s1")
        assert status.covers(1) and not status.covers(2)


@pytest.mark.parametrize(("client", "server"), [
    (models.Fact, memory_models.Fact), (models.Chain, memory_models.Chain),
    (models.ActiveFacts, memory_models.ActiveFacts),
    (models.KnownFacts, memory_models.KnownFacts), (models.Erased, memory_models.Erased),
    (models.Consent, memory_models.ConsentChanged),
    (models.HeldProposal, panel_models.ListedProposal),
    (models.HeldAnswer, panel_models.HeldAnswer),
    (models.SessionStatus, session_routes.SessionStatus),
    (models.WaitOutcome, session_routes.WaitOutcome),
])
def test_the_answers_mirror_the_servers_models(client: type, server: Any) -> None:
    own = {f.name for f in dataclasses.fields(client)} - {"timing_ms"}
    assert own == set(server.model_fields)


def test_the_export_reads_every_member_the_server_writes() -> None:
    typed = {f.name for f in dataclasses.fields(models.Export)} - {"document"}
    assert typed == set(memory_models.Export.model_fields)
    assert {f.name for f in dataclasses.fields(models.Fact)} <= set(
        memory_models.ExportFact.model_fields)


def test_the_key_is_in_no_repr_error_or_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    sent, transport = mock(down)
    api = MemoryApi(URL, service_key=KEY, transport=transport)
    assert KEY not in repr(api) and KEY not in str(api)
    assert repr(api) == "MemoryApi('http://memory.test:8088/prefix', service key)"
    with pytest.raises(MemoryApiUnavailable) as caught:
        api.search("ada", "what I said")
    error = caught.value
    assert str(error) == ("search on http://memory.test:8088: the memory API could not be "
                          "reached (ConnectError: [Errno 111] Connection refused)")
    assert error.__cause__ is None and error.__suppress_context__
    assert len(sent) == 2, "a read is tried again once"
    assert "what I said" not in str(error) and "ada" not in str(error)
    assert KEY not in repr(error) and KEY not in caplog.text
    assert "trying again" in caplog.text


def test_a_write_is_never_sent_twice_and_a_hand_over_fails_as_a_hand_over() -> None:
    sent, transport = mock(lambda r: httpx.Response(503, json={"detail": "x"},
                                                    headers={"Retry-After": "0"}))
    with MemoryApi(URL, service_key=KEY, transport=transport) as api:
        with pytest.raises(MemoryApiUnavailable):
            api.add_fact("ada", "Likes tea")
        with pytest.raises(HandoverUnavailable):
            api.hand_over(user_id="ada", session_id="s1", messages=[])
        with pytest.raises(MemoryApiUnavailable) as read:
            api.facts("ada")
    assert [r.method for r in sent] == ["POST", "POST", "GET", "GET"]
    assert read.value.retry_after_s == 0.0 and read.value.status == 503


def test_bad_arguments_fail_before_any_request() -> None:
    sent, transport = mock(answered)
    with MemoryApi(URL, token="a.b.c", transport=transport) as api:  # noqa: S106 - not a secret
        with pytest.raises(ValueError, match="user_id is empty"):
            api.facts("")
        with pytest.raises(InvalidHandover, match="session_id is empty"):
            api.hand_over(user_id="ada", session_id="", messages=[])
        with pytest.raises(InvalidHandover, match="not a list"):
            api.hand_over(user_id="ada", session_id="s1", messages="hi")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="fact_id"):
            api.remove_fact("ada", -1)
        with pytest.raises(ValueError, match="timeout_s"):
            api.wait_for_memory(user_id="ada", session_id="s1", handover_id=1, timeout_s=0)
    assert sent == []
    with pytest.raises(ConfigurationError, match="no scheme"):
        MemoryApi("memory.test:8088", service_key=KEY)
    with pytest.raises(ConfigurationError, match="retries"):
        MemoryApi(URL, service_key=KEY, retries=-1)


def test_an_answer_the_client_cannot_read_names_the_operation() -> None:
    _, transport = mock(lambda r: httpx.Response(200, json={"block": 1}))
    with MemoryApi(URL, service_key=KEY, transport=transport) as api, \
            pytest.raises(MemoryApiError, match=re.escape(
                "known_facts on http://memory.test:8088: 200 an answer this client cannot read")):
        api.known_facts("ada")


def test_a_not_ready_api_is_an_answer() -> None:
    _, transport = mock(lambda r: httpx.Response(503, json={"status": "unavailable",
                                                            "down": ["Redis"]}))
    with MemoryApi(URL, service_key=KEY, transport=transport) as api:
        assert api.readyz() == models.Readiness(ready=False, down=["Redis"])


def test_a_long_wait_is_several_polls_and_a_refused_one_is_asked_again() -> None:
    answers = iter([
        httpx.Response(429, json={"detail": "x", "error": "TooManyLongPolls"},
                       headers={"Retry-After": "0"}),
        httpx.Response(200, json={"covered": False, **STATUS} | {"session_tag": None}),
        httpx.Response(200, json={"covered": True, "latest": 2, "finished": 2,
                                  "older_lists": 0}),
    ])
    sent, transport = mock(lambda r: next(answers))
    with MemoryApi(URL, service_key=KEY, transport=transport) as api:
        outcome = api.wait_for_memory(user_id="ada", session_id="s1", handover_id=2,
                                      timeout_s=70)
    assert outcome.covered
    polls = [float(r.url.params["timeout_s"]) for r in sent]
    assert len(polls) == 3 and all(0 < p <= 30 for p in polls)
    refused, transport = mock(lambda r: httpx.Response(
        429, json={"detail": "x", "error": "TooManyLongPolls"}, headers={"Retry-After": "5"}))
    with MemoryApi(URL, service_key=KEY, transport=transport) as api, \
            pytest.raises(TooManyLongPolls) as caught:
        api.wait_for_memory(user_id="ada", session_id="s1", handover_id=2, timeout_s=1)
    assert caught.value.retry_after_s == 5.0 and len(refused) == 1


EVENT = ('id: {id}\nevent: commit\ndata: {{"session": "t", "handover": {n}, "older_lists": 0,'
         ' "outcome": "committed", "added": 1, "updated": 0, "deleted": 0, "at": 1}}\n\n')


def test_a_dropped_event_stream_resumes_after_the_last_event() -> None:
    streams = iter([EVENT.format(id="1-0", n=1) + EVENT.format(id="2-0", n=2),
                    ": keep-alive\n\n" + EVENT.format(id="3-0", n=3)])

    def stream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=next(streams, ""),
                              headers={"Content-Type": "text/event-stream"})

    sent, transport = mock(stream)
    with MemoryApi(URL, service_key=KEY, transport=transport) as api:
        events = api.memory_events(after="0")
        got = [next(events).handover for _ in range(3)]
        events.close()
    assert got == [1, 2, 3]
    assert [r.headers.get("last-event-id") for r in sent] == ["0", "2-0"]


async def test_an_async_event_stream_gives_up_after_its_reconnects() -> None:
    sent, transport = mock(lambda r: httpx.Response(200, text="",
                                                    headers={"Content-Type": "text/event-stream"}))
    async with AsyncMemoryApi(URL, service_key=KEY, transport=transport) as api:
        with pytest.raises(MemoryApiUnavailable, match=re.escape(
                "memory_events on http://memory.test:8088: the stream ended")):
            async for _ in api.memory_events(reconnects=1):
                pass
    assert len(sent) == 2
