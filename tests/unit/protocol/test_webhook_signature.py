"""A webhook delivery's signature covers its time and its body; a receiver's verify()
refuses a changed body, another key, a malformed header and a replay outside the window."""

from __future__ import annotations

import contextlib
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# A receiver that catches SignatureInvalid only must never answer 500 for a header.
NASTY = ["t=1800000000,v1=é" + "a" * 63, "t=١٨٠٠٠٠٠٠٠٠,v1=" + "a" * 64,
         "t=" + "9" * 4301 + ",v1=" + "a" * 64, sign(SECRET, BODY, 10**400),
         "t=" + "9" * 400 + ",v1=" + "a" * 64, "t=1800000000,v1=" + "\udcff" * 64,
         "t=1800000000,v1=" + "a" * 64 + ",x" * 10_000, b"t=1800000000,v1=\xff",
         b"\x00", "," * 5000, "t==,v1==", "t=1800000000,v1=" + "A" * 64]


@pytest.mark.parametrize("header", NASTY, ids=range(len(NASTY)))
def test_a_nasty_header_is_only_ever_signature_invalid(header: str | bytes) -> None:
    with pytest.raises(SignatureInvalid):
        verify(SECRET, header, BODY, now=T)  # type: ignore[arg-type]


@given(st.one_of(st.text(max_size=5000), st.binary(max_size=5000),
                 st.builds(lambda t, v: f"t={t},v1={v}", st.text(), st.text()),
                 st.builds(lambda t, v: f"t={t},v1={v}", st.integers(), st.text())))
@settings(max_examples=300, deadline=None)
def test_verify_raises_nothing_but_signature_invalid(header: str | bytes) -> None:
    with contextlib.suppress(SignatureInvalid):
        verify(SECRET, header, BODY, now=T)


def test_a_signed_header_still_verifies_from_bytes() -> None:
    assert verify(SECRET, sign(SECRET, BODY, T).encode(), BODY, now=T) == T
