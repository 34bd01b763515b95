"""What the blocking and the asyncio memory API clients share (worker.client.memory_api,
memory_api_async): the address, the credential, the bounds, and how an answer, a
retry and an event stream's reconnect are decided."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from worker.client.memory_api_wire import (
    Call,
    Credential,
    endpoint,
    error_for,
    retry_pause,
    unreadable,
)
from worker.errors import ConfigurationError, MemfleetError

log = logging.getLogger("memfleet.client.memory_api")

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_CONNECT_TIMEOUT_S = 2.0
# The event stream says ": keep-alive" after 15 s without an event: past this, it is dead.
EVENTS_READ_TIMEOUT_S = 25.0
EVENTS_RECONNECTS = 5
USER_AGENT = "memfleet-python-client"


class ClientBase:
    """What both clients share: the address, the credential, the bounds."""

    def __init__(self, url: str, *, service_key: str | None, token: str | Callable[[], str] | None,
                 timeout_s: float, connect_timeout_s: float, retries: int) -> None:
        self.endpoint = endpoint(url)
        self.credential = Credential(service_key, token)
        if not (timeout_s > 0 and connect_timeout_s > 0):
            raise ConfigurationError("timeout_s and connect_timeout_s must be above 0")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError("retries must be a whole number >= 0")
        self.timeout_s, self.connect_timeout_s, self.retries = (
            float(timeout_s), float(connect_timeout_s), retries)

    @property
    def host(self) -> str:
        """The API's scheme://host:port, as errors name it."""
        return self.endpoint.host

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.endpoint.base!r}, {self.credential.kind})"

    def _reconnect_pause(self, error: MemfleetError, failures: int, reconnects: int,
                         deadline: float | None) -> float | None:
        """How long the event stream waits before it reconnects after ``error``, its
        ``failures``-th in a row (the Retry-After, else a doubling backoff up to 5 s), or
        None when the caller's deadline comes first. ``error`` is raised when it is not
        transient or the reconnects are spent."""
        if not error.transient or failures > reconnects:
            raise error from None
        pause = error.retry_after_s if error.retry_after_s is not None else min(
            0.25 * 2 ** failures, 5.0)
        if deadline is not None and time.monotonic() + pause >= deadline:
            return None
        log.info("memory_events on %s: %s; reconnecting in %.2f s", self.host,
                 type(error).__name__, pause)
        return pause

    def _timeout(self, left_s: float) -> httpx.Timeout:
        left_s = max(left_s, 0.001)
        return httpx.Timeout(left_s, connect=min(self.connect_timeout_s, left_s))

    def _answer(self, call: Call[T], response: httpx.Response) -> T:
        if response.is_success or response.status_code in call.answers:
            try:
                return call.parse(response)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise unreadable(call, self.host, response.status_code, exc) from None
        raise error_for(call, self.host, response)

    def _retry(self, call: Call[Any], error: MemfleetError, attempt: int,
               deadline: float) -> float | None:
        pause = retry_pause(call, error, attempt, self.retries, deadline - time.monotonic())
        if pause is not None:
            log.info("%s on %s: %s; trying again in %.2f s", call.operation, self.host,
                     type(error).__name__, pause)
        return pause


def wait_check(timeout_s: float) -> float:
    if not timeout_s > 0:
        raise ValueError("timeout_s must be above 0")
    return float(timeout_s)
