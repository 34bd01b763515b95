"""Whether a process's servers answer: one line when one is lost, one when it is back.

A worker depends on Redis and PostgreSQL; either may be away for seconds (a
restart) or for hours. Nothing about that is an error of the worker's: it
waits. ``ServerWatch`` checks each server every ``WATCH_INTERVAL_S`` and says
so exactly twice per outage, at WARNING (so both lines show at any level that
shows one):

    {"event": "server away", "server": "Redis", "address": "10.0.0.5:6379",
     "reason": "connection refused: is the server running?", ...}
    {"event": "server back", "server": "Redis", "address": "10.0.0.5:6379", "away_s": 612.4}

The address is host and port only, never the URL's credentials. Meanwhile the
worker takes no job (worker.protocol.arq_worker), its ``/readyz`` names the
servers away (worker.fleet.metrics), and background passes that fail because
a server is away are not logged again (``is_server_away``, worker.fleet.periodic).
``Reachability`` is one server's state, also kept by the exporter's probe and
the webhook sender, which check by using the server rather than by pinging it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import structlog
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.errors import StoreUnavailable
from worker.server_address import address, network_reason

log = structlog.get_logger("memfleet.servers")

WATCH_INTERVAL_S = 1.0
CHECK_TIMEOUT_S = 2.0

# What a client raises when its server is away (down, restarting, unreachable), as
# opposed to refusing a request: the store's own (worker.store.translate) and redis-py's.
SERVER_AWAY: tuple[type[BaseException], ...] = (
    StoreUnavailable, RedisConnectionError, RedisTimeoutError, OSError)


def is_server_away(exc: BaseException) -> bool:
    return isinstance(exc, SERVER_AWAY)


class NoNews(Exception):
    """Raised by a check that cannot tell this time (its pool busy with jobs): the
    server's state stays as it was."""


class Reachability:
    """One server as its user last found it; logs the two lines of each outage."""

    def __init__(self, server: str, url: str | None, **fields: str) -> None:
        self.server, self.address, self.fields = server, address(url), fields
        self.lost_at: float | None = None

    @property
    def up(self) -> bool:
        return self.lost_at is None

    def failed(self, exc: BaseException) -> None:
        if self.lost_at is not None:
            return
        self.lost_at = time.monotonic()
        log.warning("server away", server=self.server, address=self.address,
                    reason=network_reason(exc) or type(exc).__name__, **self.fields)

    def answered(self) -> None:
        if self.lost_at is None:
            return
        away_s = time.monotonic() - self.lost_at
        self.lost_at = None
        log.warning("server back", server=self.server, address=self.address,
                    away_s=round(away_s, 1), **self.fields)


Check = Callable[[], Awaitable[Any]]


class ServerWatch:
    """Checks each server added every ``interval_s`` (each check bounded by
    ``timeout_s``) until cancelled; ``down()`` names those away. Every server starts
    as up: the process checked them before it started (worker.ops.preflight)."""

    def __init__(self, interval_s: float = WATCH_INTERVAL_S,
                 timeout_s: float = CHECK_TIMEOUT_S) -> None:
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self._servers: list[tuple[Reachability, Check]] = []
        self._round = asyncio.Lock()
        self._changed = asyncio.Condition()

    def add(self, server: str, url: str | None, check: Check) -> None:
        self._servers.append((Reachability(server, url), check))

    def down(self) -> list[str]:
        return [state.server for state, _ in self._servers if not state.up]

    async def check_now(self) -> None:
        """One round of checks (one at a time: a round asked for while one runs waits
        for it, then runs its own)."""
        async with self._round:
            for state, check in self._servers:
                try:
                    # Not asyncio.wait_for: on 3.11 it swallows a cancel that lands as
                    # the check answers, and the worker's shutdown waits on this task.
                    async with asyncio.timeout(self.timeout_s):
                        await check()
                except NoNews:
                    continue
                except Exception as exc:  # noqa: BLE001 - any failure: the server does not answer
                    state.failed(exc)
                else:
                    state.answered()
        async with self._changed:
            self._changed.notify_all()

    async def wait_until_up(self) -> None:
        """Return once every server answers (at once when none is away)."""
        async with self._changed:
            await self._changed.wait_for(lambda: not self.down())

    async def run(self) -> NoReturn:
        while True:
            await self.check_now()
            await asyncio.sleep(self.interval_s)
