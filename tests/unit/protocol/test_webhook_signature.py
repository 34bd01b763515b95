"""A webhook delivery's signature covers its time and its body; a receiver's verify()
refuses a changed body, another key, a malformed header and a replay outside the window."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from worker.protocol.webhook_signature import TOLERANCE_S, SignatureInvalid, sign, verify

SECRET = "receiver-secret-0123456789"  # noqa: S105 - a throwaway key
BODY = b'{"id":"1-0","session":"s","handover":1}'
T = 1_800_000_000


def test_the_header_is_t_and_an_hmac_of_t_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, BODY, T) == f"t={T},v1={expected}"


def test_a_fresh_delivery_verifies_and_gives_its_time() -> None:
    assert verify(SECRET, sign(SECRET, BODY, T), BODY, now=T + 1) == T
    assert verify(SECRET, sign(SECRET, BODY), BODY) > 0  # now, against the real clock


@pytest.mark.parametrize("now", [T + TOLERANCE_S + 1, T - TOLERANCE_S - 1, T + 86_400])
def test_a_replay_outside_the_window_is_refused(now: int) -> None:
    with pytest.raises(SignatureInvalid, match="tolerance"):
        verify(SECRET, sign(SECRET, BODY, T), BODY, now=now)


def test_the_edge_of_the_window_is_accepted() -> None:
    assert verify(SECRET, sign(SECRET, BODY, T), BODY, now=T + TOLERANCE_S) == T


def test_a_changed_body_or_time_or_key_is_refused() -> None:
    header = sign(SECRET, BODY, T)
    with pytest.raises(SignatureInvalid, match="does not match"):
        verify(SECRET, header, BODY.replace(b"1-0", b"2-0"), now=T)
    with pytest.raises(SignatureInvalid, match="does not match"):  # a re-dated replay
        verify(SECRET, header.replace(f"t={T}", f"t={T + 600}"), BODY, now=T + 600)
    with pytest.raises(SignatureInvalid, match="does not match"):
        verify("another-secret-0123456789", header, BODY, now=T)


@pytest.mark.parametrize("header", [None, "", "sha256=abc", f"t={T}", "v1=abc",
                                    "t=soon,v1=abc", f"t=-{T},v1=abc"])
def test_a_missing_or_malformed_header_is_refused(header: str | None) -> None:
    with pytest.raises(SignatureInvalid):
        verify(SECRET, header, BODY, now=T)


def test_any_of_several_signatures_may_match_while_a_secret_rotates() -> None:
    old = sign("old-secret-0123456789ab", BODY, T).split(",")[1]
    header = f"{sign(SECRET, BODY, T)},{old}"
    assert verify("old-secret-0123456789ab", header, BODY, now=T) == T
    assert verify(SECRET, header, BODY, now=T) == T
