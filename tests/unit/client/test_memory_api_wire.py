"""The memory API client's pure logic: its address, its credential, the answers'
errors (by the JSON's ``error``, else the status), the retry decision, the commit
events' parser."""

from __future__ import annotations

import httpx
import pytest

from worker.client.memory_api_wire import (
    Call,
    Credential,
    SseParser,
    detail_text,
    endpoint,
    error_class,
    error_for,
    retry_after,
    retry_pause,
    unreachable,
)
from worker.errors import (
    AccessDenied,
    ConfigurationError,
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    InvalidHandover,
    InvalidRequest,
    LongPollsFull,
    MemfleetError,
    MemoryApiError,
    MemoryApiUnavailable,
    NotFound,
    RateLimited,
    SessionBytesFull,
    TooManyLongPolls,
    UserSessionsFull,
    WriteConflict,
)

KEY = "mfk_0123456789ab_" + "ab" * 32
HOST = "http://127.0.0.1:8088"
READ = Call("facts", "GET", "/users/ada/facts", lambda r: None)
WRITE = Call("add_fact", "POST", "/users/ada/facts", lambda r: None)
HANDOVER = Call("hand_over", "POST", "/users/ada/sessions/s1/handover", lambda r: None,
                handover=True)


@pytest.mark.parametrize(("url", "base", "host"), [
    ("http://127.0.0.1:8088", "http://127.0.0.1:8088", "http://127.0.0.1:8088"),
    ("http://127.0.0.1:8088/", "http://127.0.0.1:8088", "http://127.0.0.1:8088"),
    ("https://memory.example", "https://memory.example:443", "https://memory.example:443"),
    ("HTTP://Memory.Example", "http://memory.example:80", "http://memory.example:80"),
    ("https://example.com/memory/", "https://example.com:443/memory",
     "https://example.com:443"),
    ("http://[::1]:8088", "http://[::1]:8088", "http://[::1]:8088"),
    (" http://127.0.0.1:8088 ", "http://127.0.0.1:8088", "http://127.0.0.1:8088"),
])
def test_the_address_is_scheme_host_port_and_any_prefix(url: str, base: str, host: str) -> None:
    found = endpoint(url)
    assert (found.base, found.host) == (base, host)


@pytest.mark.parametrize(("url", "says"), [
    ("127.0.0.1:8088", "has no scheme"),
    ("memory.internal", "has no scheme"),
    ("", "is empty"),
    ("ftp://memory.internal", "it takes http or https"),
    ("http://ada:hunter2@memory.internal", "holds credentials"),
    ("http://memory.internal/?key=x", "a query or a fragment"),
    ("http://memory.internal:99999", "port"),
    ("http://:8088", "no host"),
])
def test_a_bad_address_is_refused_naming_the_problem_not_the_url(url: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says) as caught:
        endpoint(url)
    assert "hunter2" not in str(caught.value)


def test_the_credential_is_one_of_a_key_or_a_token_and_never_shown() -> None:
    with pytest.raises(ConfigurationError, match="one of them"):
        Credential(None, None)
    with pytest.raises(ConfigurationError, match="one of them"):
        Credential(KEY, "a.b.c")
    with pytest.raises(ConfigurationError, match="spaces or control"):
        Credential(KEY + "\n", None)
    key = Credential(KEY, None)
    assert KEY not in repr(key) and KEY not in str(key) and "service key" in repr(key)
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(key)
    tokens = iter(["t1", "t2"])
    minted = Credential(None, lambda: next(tokens))
    assert minted.kind == "user token"
    sent = [next(minted.auth_flow(httpx.Request("GET", "http://x/"))).headers["Authorization"]
            for _ in range(2)]
    assert sent == ["Bearer t1", "Bearer t2"], "a fresh token per request"


@pytest.mark.parametrize(("status", "named", "handover", "expected"), [
    (400, "InvalidHandover", True, InvalidHandover),
    (413, "HandoverTooLarge", True, HandoverTooLarge),
    (429, "HandoverBacklogFull", True, HandoverBacklogFull),
    (429, "SessionBytesFull", True, SessionBytesFull),
    (429, "UserSessionsFull", True, UserSessionsFull),
    (503, "HandoverUnavailable", True, HandoverUnavailable),
    # A status, a wait or the events with Redis away: not a failed hand-over.
    (503, "HandoverUnavailable", False, MemoryApiUnavailable),
    (429, "TooManyLongPolls", False, TooManyLongPolls),
    (503, "LongPollsFull", False, LongPollsFull),
    (401, None, False, AccessDenied),
    (403, None, True, AccessDenied),
    (404, None, False, NotFound),
    (409, None, False, WriteConflict),
    (422, None, False, InvalidRequest),
    (422, None, True, InvalidHandover),
    (413, None, False, InvalidRequest),
    (413, None, True, HandoverTooLarge),
    (429, None, False, RateLimited),
    (429, None, True, HandoverBacklogFull),
    (503, None, False, MemoryApiUnavailable),
    (502, None, True, HandoverUnavailable),
    (500, "SomethingNew", False, MemoryApiUnavailable),
    (418, None, False, MemoryApiError),
])
def test_an_answer_raises_the_class_its_json_names_else_its_status(
    status: int, named: str | None, handover: bool, expected: type[MemfleetError],
) -> None:
    assert error_class(status, named, handover=handover) is expected


def answer(status: int, body: object, **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


def test_an_error_names_the_operation_the_host_and_the_apis_reason_only() -> None:
    error = error_for(READ, HOST, answer(403, {"detail": "the service key lacks the read scope"}))
    assert isinstance(error, AccessDenied)
    assert str(error) == f"facts on {HOST}: 403 the service key lacks the read scope"
    assert "/users/ada" not in str(error), "the path names the user"
    assert (error.status, error.retry_after_s) == (403, None)


def test_the_hand_overs_refusals_keep_their_figures_and_retry_after() -> None:
    full = error_for(HANDOVER, HOST, answer(
        429, {"detail": "the session would hold 5000000 bytes of message lists no job has"
                        " finished, over the limit of 4194304", "error": "SessionBytesFull"},
        **{"Retry-After": "5"}))
    assert isinstance(full, SessionBytesFull) and isinstance(full, HandoverUnavailable)
    assert (full.size, full.limit, full.retry_after_s, full.status) == (  # type: ignore[attr-defined]
        5_000_000, 4_194_304, 5.0, 429)
    large = error_for(HANDOVER, HOST, answer(413, {
        "detail": "message 0 is 70000 bytes, over the limit of 65536",
        "error": "HandoverTooLarge"}))
    assert isinstance(large, HandoverTooLarge)
    assert (large.size, large.limit) == (70_000, 65_536)
    sessions = error_for(HANDOVER, HOST, answer(429, {
        "detail": "the user has 16 sessions with message lists no job has finished, the limit",
        "error": "UserSessionsFull"}))
    assert isinstance(sessions, UserSessionsFull) and sessions.limit == 16
    door = error_for(HANDOVER, HOST, answer(413, {"detail": "the request is too large",
                                                  "error": "HandoverTooLarge"}))
    assert isinstance(door, HandoverTooLarge) and door.size is None


def test_a_422_names_fields_and_an_answer_without_json_its_status() -> None:
    error = error_for(READ, HOST, answer(422, {"detail": [
        {"type": "less_than_equal", "loc": ["query", "k"], "msg": "Input should be <= 100"}]}))
    assert str(error) == f"facts on {HOST}: 422 query.k: Input should be <= 100"
    proxy = error_for(READ, HOST, httpx.Response(502, text="<html>Bad gateway</html>"))
    assert isinstance(proxy, MemoryApiUnavailable)
    assert str(proxy) == f"facts on {HOST}: 502 (no reason given)"
    assert detail_text({"detail": "x" * 1000}).endswith("...")
    assert detail_text({"detail": "a\nb\x1b"}) == "a b "


@pytest.mark.parametrize(("header", "seconds"), [
    ("5", 5.0), ("0", 0.0), ("1.5", 1.5), (None, None), ("soon", None), ("-1", None),
    ("inf", None), ("Wed, 21 Oct 2026 07:28:00 GMT", None)])
def test_retry_after_is_seconds(header: str | None, seconds: float | None) -> None:
    assert retry_after(header) == seconds


def test_an_api_that_does_not_answer_is_unavailable_named_by_host_and_operation() -> None:
    refused = unreachable(READ, HOST, httpx.ConnectError("[Errno 111] Connection refused"))
    assert isinstance(refused, MemoryApiUnavailable) and refused.transient
    assert str(refused) == (f"facts on {HOST}: the memory API could not be reached "
                            "(ConnectError: [Errno 111] Connection refused)")
    slow = unreachable(HANDOVER, HOST, httpx.ReadTimeout("timed out"))
    assert isinstance(slow, HandoverUnavailable)
    assert "did not answer in time" in str(slow)
    quoting = unreachable(READ, HOST, httpx.ConnectError(f"GET http://h/users/ada {KEY}"))
    assert str(quoting).endswith("(ConnectError)"), "words that might quote the request go"


def test_only_reads_are_tried_again_briefly_and_within_their_time() -> None:
    down = MemoryApiUnavailable("x")
    assert retry_pause(READ, down, 0, 1, 5.0) == pytest.approx(0.1)
    assert retry_pause(READ, down, 1, 1, 5.0) is None, "retries=1: once"
    assert retry_pause(WRITE, down, 0, 1, 5.0) is None, "a write is never sent twice"
    busy = error_for(READ, HOST, answer(503, {"detail": "x"}, **{"Retry-After": "1"}))
    assert retry_pause(READ, busy, 0, 1, 5.0) == 1.0
    assert retry_pause(READ, busy, 0, 1, 0.5) is None, "not past the call's time"
    later = error_for(READ, HOST, answer(503, {"detail": "x"}, **{"Retry-After": "30"}))
    assert retry_pause(READ, later, 0, 1, 60.0) is None, "a long Retry-After is the caller's"
    for status in (403, 404, 422, 429):
        refused = error_for(READ, HOST, answer(status, {"detail": "x"}))
        assert retry_pause(READ, refused, 0, 3, 5.0) is None, status
    slots = error_for(READ, HOST, answer(503, {"detail": "x", "error": "LongPollsFull"}))
    assert retry_pause(READ, slots, 0, 3, 5.0) is None, "a wait handles its own"


DOCUMENTED = """id: 1767225600000-0
event: commit
data: {"session": "3f2a9c0d1e4b5a69", "handover": 2, "older_lists": 0, "outcome": "committed", "added": 1, "updated": 0, "deleted": 0, "at": 1767225600000}

: keep-alive

"""  # noqa: E501 - the stream as docs/api.md shows it


def test_the_documented_event_stream_parses_to_commit_events() -> None:
    parser = SseParser(HOST)
    events = [e for line in DOCUMENTED.splitlines() if (e := parser.feed(line)) is not None]
    assert len(events) == 1
    (event,) = events
    assert (event.id, event.session, event.handover, event.older_lists, event.outcome,
            event.added, event.updated, event.deleted, event.at_ms) == (
        "1767225600000-0", "3f2a9c0d1e4b5a69", 2, 0, "committed", 1, 0, 0, 1767225600000)
    assert event.covers(2) and not event.covers(3)


def test_other_events_are_skipped_and_a_broken_one_is_an_error() -> None:
    parser = SseParser(HOST)
    assert [parser.feed(line) for line in ("event: other", "id: 1-0", "data: {}", "")] \
        == [None] * 4
    for line in ("id: 2-0", "event: commit", "data: {\"session\": 1}"):
        parser.feed(line)
    with pytest.raises(MemoryApiError, match=f"memory_events on {HOST}: an event"):
        parser.feed("")
