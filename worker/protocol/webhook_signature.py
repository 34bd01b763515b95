"""The signature of a webhook delivery: made by ``memfleet webhook``, checked by receivers.

Each POST carries ``X-Memfleet-Signature: t=<unix seconds>,v1=<hex>``, where
``<hex>`` is the HMAC-SHA-256, under the shared secret, of ``f"{t}."`` followed
by the raw body. The body holds the event's id, so the id is signed too. ``t``
is the time of that POST (a retried delivery is signed again), and a receiver
accepts it only within ``TOLERANCE_S`` of its own clock: a captured delivery
cannot be replayed after that, and within it the receiver's deduplication by
the body's event id (which at-least-once delivery requires anyway) makes a replay
a no-op. Not by the ``X-Memfleet-Event-Id`` header: it is not signed, and a
replay could change it.

A receiver in Python calls ``verify(secret, headers["x-memfleet-signature"],
raw_body)`` before parsing the body; elsewhere, do the same four steps: split
the header on ",", take ``t`` and every ``v1``, compare HMAC-SHA-256(secret,
f"{t}." + body) with each ``v1`` in constant time, and check ``|now - t|``;
refuse, unread, a header over MAX_HEADER_CHARS, non-ASCII, or whose ``t`` is
not 1 to 12 digits.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from worker.errors import MemfleetError

HEADER = "x-memfleet-signature"
TOLERANCE_S = 300
# Shorter secrets can be guessed offline from one captured delivery.
MIN_SECRET_CHARS = 16
# A header longer than this is refused unread: one t and a few v1 (a secret being
# rotated) fit many times over.
MAX_HEADER_CHARS = 1024
# Unix seconds, well past the year 5000: a longer t cannot be a clock, and int() of
# a 4,300-digit one raises ValueError.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_V1 = re.compile(r"[0-9a-f]{64}")


class SignatureInvalid(MemfleetError):
    """A delivery whose signature is missing, malformed, wrong or too old: drop it."""


def _digest(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body,
                    hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The header value for ``body`` sent at ``timestamp`` (default: now)."""
    moment = int(time.time()) if timestamp is None else timestamp
    return f"t={moment},v1={_digest(secret, moment, body)}"


def verify(secret: str, header: str | bytes | None, body: bytes, *,
           now: float | None = None, tolerance_s: float = TOLERANCE_S) -> int:
    """Check a delivery's signature; its timestamp when good, else SignatureInvalid,
    and nothing else whatever the header holds (text or bytes, any length).

    Several ``v1`` values are accepted (any may match): a sender moving to a new
    secret can sign with both while receivers change theirs."""
    text = _header_text(header)
    timestamp: int | None = None
    given: list[str] = []
    for part in text.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and _TIMESTAMP.fullmatch(value):
            timestamp = int(value)
        elif name == "v1" and _V1.fullmatch(value):
            given.append(value)
    if timestamp is None or not given:
        raise SignatureInvalid("the signature header is malformed")
    expected = _digest(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, value) for value in given):
        raise SignatureInvalid("the signature does not match the body")
    age = (time.time() if now is None else now) - timestamp
    if abs(age) > tolerance_s:
        raise SignatureInvalid(f"the signature's timestamp is {age:.0f} s away from now, "
                               f"beyond the {tolerance_s:g} s tolerance")
    return timestamp


def _header_text(header: object) -> str:
    """The header as ASCII text of a bounded length, else SignatureInvalid."""
    if not header:
        raise SignatureInvalid("the delivery is not signed")
    if not isinstance(header, str | bytes) or len(header) > MAX_HEADER_CHARS:
        raise SignatureInvalid("the signature header is malformed")
    if isinstance(header, bytes):
        if not header.isascii():
            raise SignatureInvalid("the signature header is malformed")
        return header.decode("ascii")
    if not header.isascii():
        raise SignatureInvalid("the signature header is malformed")
    return header
