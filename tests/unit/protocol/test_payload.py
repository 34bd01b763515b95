from __future__ import annotations

from datetime import UTC, datetime

import pytest

from worker.config import Settings
from worker.errors import HandoverTooLarge, InvalidHandover, InvalidJob
from worker.protocol.payload import (
    Handover,
    Limits,
    check_id,
    decode_handover,
    encode_handover,
    fit_handover,
    parse_messages,
    recent_window,
)

LIMITS = Limits(max_message_chars=100, max_messages=5, max_id_chars=10)


def test_valid_messages_parse() -> None:
    parsed = parse_messages([{"role": "user", "content": "I live in Paris"}], LIMITS)
    assert parsed[0].role == "user"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("not a list", "must be a list"),
        ([{"role": "user"}], "message 0: content"),
        ([{"content": "x"}], "message 0: role"),
        ([{"role": "wizard", "content": "x"}], "message 0: role"),
        ([{"role": "user", "content": 5}], "message 0: content"),
        ([{"role": "user", "content": "   "}], "content is empty"),
        ([{"role": "user", "content": "x" * 101}], "over the limit of 100"),
        ([{"role": "user", "content": "bell\x07"}], "control characters"),
        ([{"role": "user", "content": "lone \ud800 surrogate"}], "not valid UTF-8"),
        ([{"role": "user", "content": "x"}] * 6, "more than the limit of 5"),
        (["just a string"], "message 0"),
    ],
)
def test_bad_messages_are_refused_with_a_clear_error(raw: object, fragment: str) -> None:
    with pytest.raises(InvalidHandover, match=fragment):
        parse_messages(raw, LIMITS)


def test_errors_never_echo_the_content() -> None:
    secret = "my password is hunter2"  # noqa: S105 - the point: content must not leak
    with pytest.raises(InvalidHandover) as caught:
        parse_messages([{"role": "user", "content": secret + "\x00"}], LIMITS)
    assert "hunter2" not in str(caught.value)


def test_newlines_and_tabs_are_fine() -> None:
    parse_messages([{"role": "user", "content": "line\nnext\tcol\r\n"}], LIMITS)


@pytest.mark.parametrize("value", ["", "  ", None, 7, "x" * 11])
def test_bad_ids(value: object) -> None:
    with pytest.raises(InvalidHandover):
        check_id(value, "session_id", LIMITS)


@pytest.mark.parametrize(
    "raw", [None, b"not json", b"{}", b'{"v": 1, "session_id": "s"}', b"\xff\xfe"]
)
def test_unreadable_payloads_are_invalid_jobs(raw: bytes | None) -> None:
    with pytest.raises(InvalidJob):
        decode_handover(raw, LIMITS)


def _handover(agent_id: str | None) -> Handover:
    return Handover(session_id="s1", user_id="u1",
                    messages=parse_messages([{"role": "user", "content": "hi"}], LIMITS),
                    handed_over_at=datetime(2026, 11, 24, tzinfo=UTC), agent_id=agent_id)


def test_an_agent_travels_in_the_payload_and_its_absence_changes_nothing() -> None:
    with_agent = encode_handover(_handover("coach"))
    assert decode_handover(with_agent, LIMITS).agent_id == "coach"
    without = encode_handover(_handover(None))
    assert b"agent_id" not in without  # the payload an older worker reads, byte for byte
    assert decode_handover(without, LIMITS).agent_id is None
    # The hand-over script compares lists up to this marker: the agent comes after it.
    assert with_agent.index(b'],"handed_over_at":') < with_agent.index(b'"agent_id"')


def test_an_agent_id_follows_the_id_rule() -> None:
    bad = encode_handover(_handover("x" * 11))  # over LIMITS.max_id_chars
    with pytest.raises(InvalidJob, match="agent_id"):
        decode_handover(bad, LIMITS)


def _handover_of(contents: list[str]) -> Handover:
    return Handover(session_id="s", user_id="u",
                    messages=parse_messages([{"role": "user", "content": c} for c in contents],
                                            Limits()),
                    handed_over_at=datetime(2026, 1, 1, tzinfo=UTC), trace={"traceparent": "x"})


def test_a_message_over_the_byte_limit_is_refused_by_its_utf8_size() -> None:
    limits = Limits(max_message_bytes=40)
    assert parse_messages([{"role": "user", "content": "\U0001f600" * 10}], limits)  # 40 B
    with pytest.raises(HandoverTooLarge) as caught:
        parse_messages([{"role": "user", "content": "\U0001f600" * 11}], limits)  # 11 chars
    assert str(caught.value) == "message 0: content is 44 bytes, over the limit of 40"


@pytest.mark.parametrize("limit", [300, 301, 350, 420, 10_000])
def test_a_hand_over_is_cut_to_its_newest_messages_that_fit(limit: int) -> None:
    handover = _handover_of([f"m{n} \u00e9\u00e9\u00e9" for n in range(20)])
    window, payload = fit_handover(handover, Limits(max_handover_bytes=limit))
    assert payload == encode_handover(window) and len(payload) <= limit
    assert window.messages == handover.messages[-len(window.messages):], "the newest, in order"
    if len(window.messages) < len(handover.messages):
        one_more = handover.model_copy(
            update={"messages": handover.messages[-len(window.messages) - 1:]})
        assert len(encode_handover(one_more)) > limit, "as many as fit"


def test_a_hand_over_whose_newest_message_cannot_fit_is_refused() -> None:
    with pytest.raises(HandoverTooLarge, match=r"the hand-over is 2\d\d bytes, over the limit"):
        fit_handover(_handover_of(["x" * 100, "y" * 120]), Limits(max_handover_bytes=200))


def test_byte_budgets_that_cannot_work_together_are_refused_at_boot() -> None:
    with pytest.raises(ValueError, match="MAX_HANDOVER_BYTES must be at least"):
        Settings(max_message_bytes=100_000, max_handover_bytes=100_000)
    with pytest.raises(ValueError, match="MAX_SESSION_BYTES must be at least"):
        Settings(max_session_bytes=1_000)


def test_messages_no_window_can_hold_are_neither_checked_nor_sent() -> None:
    limits = Limits(max_message_bytes=100, max_handover_bytes=1_000)
    ancient = {"role": "user", "content": "\U0001f600" * 990}  # over the message limit
    recent = [{"role": "user", "content": f"m{n}"} for n in range(10)]
    window = recent_window([ancient, *recent], limits)
    assert window == recent, "990 characters and the rest cannot fit 1,000 bytes"
    assert len(parse_messages(window, limits)) == 10
    # A list whose newest message alone is too large is refused for it, by its size.
    with pytest.raises(HandoverTooLarge, match="message 5: content is 3960 bytes"):
        parse_messages(recent_window([*recent, ancient], limits), limits)
