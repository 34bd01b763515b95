"""The memory API client's pure half, shared by MemoryApi and AsyncMemoryApi: the
API's address, the credential, the answers' errors, the commit events' parser.

Errors (worker.errors): an answer whose JSON names its class in ``error`` raises that
class (docs/api.md); otherwise its status decides. Only the hand-over route raises
the hand-over's classes (HandoverUnavailable and its kinds, InvalidHandover,
HandoverTooLarge); every other route the API did not answer is MemoryApiUnavailable.
A message names the operation and the API's scheme://host:port and the API's own
reason (fixed words and field names: the API never echoes input), never the path
(it names the user), the key or the token.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote, urlsplit

import httpx

from worker.errors import (
    AccessDenied,
    ConfigurationError,
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    InvalidHandover,
    InvalidRequest,
    LongPollRefused,
    LongPollsFull,
    MemfleetError,
    MemoryApiError,
    MemoryApiUnavailable,
    MemoryOff,
    NotFound,
    RateLimited,
    SessionBytesFull,
    TooManyLongPolls,
    UserSessionsFull,
    WriteConflict,
)
from worker.protocol.events import CommitEvent

T = TypeVar("T")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_DETAIL_CHARS = 300
MAX_RETRY_PAUSE_S = 1.0  # a read is tried again only after a pause of at most this


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The API's base URL (scheme, host, port and any path prefix, no trailing
    slash) and ``host``, its scheme://host:port, which errors name."""

    base: str
    host: str


def endpoint(url: str) -> Endpoint:
    """The memory API's address; ConfigurationError naming what is wrong with it
    (never echoing it: a URL may carry a password)."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError("the memory API's URL is empty; give one like "
                                 "http://memory.internal:8088")
    if "://" not in url:
        raise ConfigurationError("the memory API's URL has no scheme: give http:// or "
                                 "https:// and the host, like http://memory.internal:8088")
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ConfigurationError(f"the memory API's URL has the scheme {scheme[:10]!r}; "
                                 "it takes http or https")
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError("the memory API's URL holds credentials; pass "
                                 "service_key= or token= instead")
    if parts.query or parts.fragment:
        raise ConfigurationError("the memory API's URL has a query or a fragment; give "
                                 "the scheme, host, port and any path prefix only")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ConfigurationError("the memory API's URL has a port that is not a number "
                                 "from 0 to 65535") from None
    if not parts.hostname:
        raise ConfigurationError("the memory API's URL has no host")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    prefix = parts.path.rstrip("/")
    return Endpoint(base=f"{scheme}://{host}:{port}{prefix}", host=f"{scheme}://{host}:{port}")


class Credential(httpx.Auth):
    """A service key (``mfk_...``, scoped) or an end user's token (a JWT, or a function
    that mints a fresh one per request), sent as ``Authorization: Bearer``. It never
    shows in repr or str; the header is set on each request, not kept on the client."""

    __slots__ = ("_secret", "kind")

    def __init__(self, service_key: str | None, token: str | Callable[[], str] | None) -> None:
        if (service_key is None) == (token is None):
            raise ConfigurationError("the memory API client takes service_key= (a chat "
                                     "server's key) or token= (an end user's), one of them")
        secret = service_key if service_key is not None else token
        if isinstance(secret, str):
            if not secret or any(c.isspace() or not c.isprintable() for c in secret):
                raise ConfigurationError(f"the {self._kind_of(service_key)} is empty or holds "
                                         "spaces or control characters")
        elif not callable(secret):
            raise ConfigurationError(f"the {self._kind_of(service_key)} is not a string")
        self.kind = self._kind_of(service_key)
        self._secret = secret

    @staticmethod
    def _kind_of(service_key: str | None) -> str:
        return "service key" if service_key is not None else "user token"

    def _value(self) -> str:
        value = self._secret() if callable(self._secret) else self._secret
        if not isinstance(value, str) or not value:
            raise ConfigurationError("the token function gave no token")
        return value

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._value()}"
        yield request

    def __repr__(self) -> str:
        return f"<{self.kind}, hidden>"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a memory API credential is not serialized: it would carry the secret")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request: its operation's name (errors name it), the route, how its answer
    is read, and whether it is the hand-over (whose refusals are the hand-over's
    errors)."""

    operation: str
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, str] | None = None
    body: Any = None
    headers: dict[str, str] | None = None
    handover: bool = False
    # Seconds this call may take at most; None: the client's timeout_s.
    timeout_s: float | None = None
    # Statuses that are answers besides 2xx (readyz's 503).
    answers: tuple[int, ...] = ()

    @property
    def idempotent(self) -> bool:
        return self.method == "GET"


def segment(value: str, what: str, error: type[ValueError] = ValueError) -> str:
    """A path segment of a user, session or other id, percent-encoded."""
    if not isinstance(value, str) or not value:
        raise error(f"{what} is empty")
    return quote(value, safe="")


def fact_number(value: int, what: str = "fact_id") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} is not a whole number >= 0")
    return value


def retry_after(header: str | None) -> float | None:
    """Retry-After in seconds (the API sends whole seconds); None without a usable one."""
    try:
        seconds = float(header) if header is not None else math.nan
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text)


def detail_text(body: Any) -> str:
    """The API's ``detail``: a string, or FastAPI's list of {loc, msg} (a 422)."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        text = detail
    elif isinstance(detail, list):
        text = "; ".join(
            ".".join(str(p) for p in item.get("loc", ()) if p != "body") + ": "
            + str(item.get("msg", "invalid"))
            for item in detail if isinstance(item, dict))
    else:
        return ""
    text = _printable(text)
    return text if len(text) <= _DETAIL_CHARS else text[:_DETAIL_CHARS] + "..."


_HANDOVER_KINDS: dict[str, type[MemfleetError]] = {
    "InvalidHandover": InvalidHandover, "HandoverTooLarge": HandoverTooLarge,
    "HandoverUnavailable": HandoverUnavailable, "HandoverBacklogFull": HandoverBacklogFull,
    "SessionBytesFull": SessionBytesFull, "UserSessionsFull": UserSessionsFull,
}
_LONG_POLL_KINDS: dict[str, type[MemfleetError]] = {
    "TooManyLongPolls": TooManyLongPolls, "LongPollsFull": LongPollsFull,
}
_WRITE_KINDS: dict[str, type[MemfleetError]] = {"MemoryOff": MemoryOff}
_BYTES = re.compile(r"(\d+) bytes.*?limit of (\d+)")
_SESSIONS = re.compile(r"has (\d+) sessions")


def error_class(status: int, named: Any, *, handover: bool) -> type[MemfleetError]:
    """The class an answer of ``status`` whose JSON ``error`` is ``named`` raises."""
    if isinstance(named, str) and named in _LONG_POLL_KINDS:
        return _LONG_POLL_KINDS[named]
    if isinstance(named, str) and named in _HANDOVER_KINDS:
        if handover:
            return _HANDOVER_KINDS[named]
        if named == "HandoverUnavailable":  # Redis away for a status, a wait, the events
            return MemoryApiUnavailable
    if status in (401, 403):
        return AccessDenied
    if status == 404:
        return NotFound
    if status == 409:
        return _WRITE_KINDS.get(named, WriteConflict) if isinstance(named, str) else WriteConflict
    if status == 413:
        return HandoverTooLarge if handover else InvalidRequest
    if status in (400, 422):
        return InvalidHandover if handover else InvalidRequest
    if status == 429:
        return HandoverBacklogFull if handover else RateLimited
    if status >= 500:
        return HandoverUnavailable if handover else MemoryApiUnavailable
    return MemoryApiError


def _made(cls: type[MemfleetError], message: str) -> MemfleetError:
    """An instance of ``cls`` with ``message``; the hand-over's size errors take their
    figures from the message when it has them (their constructors take only figures)."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    if issubclass(cls, HandoverTooLarge | SessionBytesFull):
        found = _BYTES.search(message)
        error.size, error.limit = (  # type: ignore[attr-defined]
            (int(found[1]), int(found[2])) if found else (None, None))
    elif issubclass(cls, UserSessionsFull):
        found = _SESSIONS.search(message)
        error.limit = int(found[1]) if found else None  # type: ignore[attr-defined]
    return error


def error_for(call: Call[Any], host: str, response: httpx.Response) -> MemfleetError:
    """The error an answer that is not a success raises."""
    try:
        body = response.json()
    except ValueError:
        body = None
    named = body.get("error") if isinstance(body, dict) else None
    cls = error_class(response.status_code, named, handover=call.handover)
    detail = detail_text(body) or "(no reason given)"
    error = _made(cls, f"{call.operation} on {host}: {response.status_code} {detail}")
    error.status = response.status_code
    error.retry_after_s = retry_after(response.headers.get("retry-after"))
    return error


def unreachable(call: Call[Any], host: str, cause: Exception) -> MemfleetError:
    """The error of a call the API did not answer (refused, reset, timed out)."""
    cls = HandoverUnavailable if call.handover else MemoryApiUnavailable
    what = ("did not answer in time" if isinstance(cause, httpx.TimeoutException | TimeoutError)
            else "could not be reached")
    reason = _printable(str(cause))[:120]
    # The transport's own words ("[Errno 111] Connection refused"), unless they might
    # quote the request (a URL names the user).
    said = f": {reason}" if reason and "/" not in reason and "mfk_" not in reason else ""
    return _made(cls, f"{call.operation} on {host}: the memory API {what} "
                      f"({type(cause).__name__}{said})")


def retry_pause(call: Call[Any], error: MemfleetError, attempt: int, retries: int,
                left_s: float) -> float | None:
    """Seconds to pause before trying ``call`` again after ``error`` (its ``attempt``-th
    failure, from 0), or None: not again. Only reads (GET) are tried again, at most
    ``retries`` times, and only when the API was not reached or answered 502, 503 or
    504, after its Retry-After (at most MAX_RETRY_PAUSE_S) within the ``left_s``
    the call has left."""
    if not call.idempotent or attempt >= retries or isinstance(error, LongPollRefused):
        return None
    if error.status is None:
        if not isinstance(error, MemoryApiUnavailable):
            return None
    elif error.status not in (502, 503, 504):
        return None
    pause = error.retry_after_s if error.retry_after_s is not None else 0.1 * 2 ** attempt
    return pause if pause <= MAX_RETRY_PAUSE_S and pause < left_s else None


def unreadable(call: Call[Any], host: str, status: int, cause: Exception) -> MemoryApiError:
    """An answer of the right status that this client cannot read."""
    return MemoryApiError(f"{call.operation} on {host}: {status} an answer this client "
                          f"cannot read ({type(cause).__name__})")


class SseParser:
    """Server-sent events, line by line (the WHATWG rules memfleet's stream uses):
    ``feed`` returns a CommitEvent when a blank line ends a ``commit`` event."""

    def __init__(self, host: str) -> None:
        self._host = host
        self._id: str | None = None
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> CommitEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: ": keep-alive"
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    def _dispatch(self) -> CommitEvent | None:
        event_id, kind, data = self._id, self._event or "message", "\n".join(self._data)
        self._id, self._event, self._data = None, "", []
        if kind != "commit" or event_id is None or not data:
            return None
        try:
            d = json.loads(data)
            return CommitEvent(id=event_id, session=str(d["session"]),
                               handover=int(d["handover"]), older_lists=int(d["older_lists"]),
                               outcome=str(d["outcome"]), added=int(d["added"]),
                               updated=int(d["updated"]), deleted=int(d["deleted"]),
                               at_ms=int(d["at"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MemoryApiError(f"memory_events on {self._host}: an event this client "
                                 f"cannot read ({type(exc).__name__})") from None
