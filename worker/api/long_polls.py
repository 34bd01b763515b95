"""Caps on long-lived requests (the hand-over wait, the event streams), per API process.

A long-lived request holds a connection, a file descriptor and a share of the
process's Redis work for up to 30 s (a wait) or for as long as the client likes
(an event stream). Each kind has a ``LongPolls`` that admits it:

- **per caller**: a service key (by its id) or an end user (a user token, by its
  subject) has at most ``per_key`` or ``per_user`` open at once; one more is a
  429 (``"error": "TooManyLongPolls"``) with Retry-After, and another caller still
  gets in;
- **per process**: at most ``per_process`` open at once, whoever holds them; one
  more is a 503 (``"error": "LongPollsFull"``) with Retry-After.

Counted in this process only (no Redis round trip per request): with N API
processes behind a balancer a caller holds at most N times its share. A slot is
given back when its request ends, however it ends (``Slot.release`` is
idempotent). The caller's raw id is a key of a dict here and nothing else: the
log names a service key's id, never a user's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import TracebackType

from fastapi.responses import JSONResponse

from worker.api.errors import refusal
from worker.api.service_auth import Caller
from worker.api.settings import ApiSettings

log = logging.getLogger("memfleet.api.long_polls")

# A wait ends within 30 s and most streams' clients go within seconds of a drop: a
# slot is likely free again by then.
RETRY_AFTER_S = 5
TOO_MANY = "TooManyLongPolls"  # the caller's share is taken: 429
FULL = "LongPollsFull"  # the process's: 503


@dataclass(frozen=True, slots=True)
class Caps:
    per_process: int
    per_key: int  # a service key
    per_user: int  # an end user's token


class LongPollRefused(Exception):
    """No slot: ``status`` 429 (the caller's share) or 503 (the process's)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status

    def response(self) -> JSONResponse:
        return refusal(self.status, str(self), TOO_MANY if self.status == 429 else FULL,
                       retry_after_s=RETRY_AFTER_S)


def caller_id(who: Caller) -> tuple[str, str]:
    """Whose share a request takes: ("key", key id) or ("user", user id)."""
    if who.key_id is not None:
        return ("key", who.key_id)
    assert who.user_id is not None
    return ("user", who.user_id)


@dataclass(slots=True)
class Slot:
    """One admitted request's place; ``release`` gives it back (once, however often
    it is called). A context manager too."""

    _owner: LongPolls
    _caller: tuple[str, str]
    _released: bool = field(default=False)

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._owner._give_back(self._caller)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class LongPolls:
    """One per kind of long-lived request per API process (ApiDeps)."""

    def __init__(self, name: str, caps: Caps) -> None:
        self.name, self.caps = name, caps
        self._open: dict[tuple[str, str], int] = {}
        self.total = 0

    def open_for(self, who: Caller) -> int:
        return self._open.get(caller_id(who), 0)

    def admit(self, who: Caller) -> Slot:
        """A slot for ``who``'s request, or LongPollRefused (429 or 503)."""
        key = caller_id(who)
        share = self.caps.per_key if key[0] == "key" else self.caps.per_user
        held = self._open.get(key, 0)
        if held >= share:
            # The caller's share first: a caller over it learns so even when the
            # process is full too, and waits for its own requests to end.
            if key[0] == "key":
                log.info("%s: 429: service key %s has %d open", self.name, key[1], held)
            else:
                log.info("%s: 429: a user's token has %d open", self.name, held)
            raise LongPollRefused(429, f"this caller has {held} {self.name} open, its "
                                       "share of this API process; retry later")
        if self.total >= self.caps.per_process:
            log.warning("%s: 503: the process has %d open", self.name, self.total)
            raise LongPollRefused(503, f"this API process has its fill of {self.name} "
                                       "open; retry later")
        self._open[key] = held + 1
        self.total += 1
        return Slot(self, key)

    def _give_back(self, key: tuple[str, str]) -> None:
        left = self._open[key] - 1
        if left:
            self._open[key] = left
        else:
            del self._open[key]  # no entry kept for a caller with nothing open
        self.total -= 1


def wait_slots(settings: ApiSettings) -> LongPolls:
    """The hand-over waits' caps (GET .../wait)."""
    return LongPolls("waits", Caps(per_process=settings.api_waits_max,
                                   per_key=settings.api_waits_per_key,
                                   per_user=settings.api_waits_per_user))


def event_stream_slots(settings: ApiSettings) -> LongPolls:
    """The event streams' caps (GET /events takes service keys only: no user share)."""
    return LongPolls("event streams", Caps(per_process=settings.api_event_streams_max,
                                           per_key=settings.api_event_streams_per_key,
                                           per_user=0))
