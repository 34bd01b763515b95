"""What one API process remembers of service keys, so that checking one costs the
database little: read keys in a least-recently-used cache with a lifetime, and
ids that exist in no row answered without a query (worker.api.service_auth).

An id not in the cache is looked up by itself while such lookups are few
(``LookupBudget``): a key created a moment ago, by ``memfleet keys create`` on
another machine, works at once. Past the budget (a caller presenting random ids)
an id is looked up only when it is in the snapshot of every key id (``KeyIds``),
read at most once per its lifetime however many callers wait for it: random ids
then cost one query per lifetime, and a key created meanwhile works once the
next snapshot is read.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class TimedLru(Generic[V]):
    """At most ``size`` entries, each answered for ``ttl_s`` after it was put; past the
    size, the least recently used goes (not the whole cache at once). An entry past
    its lifetime is no longer answered, but is still ``in`` the cache until replaced
    or evicted: the process has seen that key."""

    def __init__(self, size: int, ttl_s: float) -> None:
        self._size, self._ttl_s = size, ttl_s
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()

    def get(self, key: str, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[1] if now - entry[0] < self._ttl_s else None

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def put(self, key: str, value: V, now: float) -> None:
        self._entries[key] = (now, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class LookupBudget:
    """``per_window`` lookups of ids the process has not seen, every ``window_s``."""

    def __init__(self, per_window: int, window_s: float) -> None:
        self._per_window, self._window_s = per_window, window_s
        self._started, self._spent = float("-inf"), 0

    def take(self, now: float) -> bool:
        if now - self._started >= self._window_s:
            self._started, self._spent = now, 0
        if self._spent >= self._per_window:
            return False
        self._spent += 1
        return True


class KeyIds:
    """Every key id in the database, read again when older than ``ttl_s`` and asked for;
    one read at a time, shared by every caller waiting for it. ``load`` answers None
    when there are too many ids to hold: then nothing is known of ids."""

    def __init__(self, load: Callable[[], Awaitable[frozenset[str] | None]],
                 ttl_s: float) -> None:
        self._load, self._ttl_s = load, ttl_s
        self._ids: frozenset[str] | None = None
        self._read_at = float("-inf")
        self._reading: asyncio.Task[frozenset[str] | None] | None = None

    async def may_exist(self, key_id: str, now: float) -> bool:
        if now - self._read_at >= self._ttl_s:
            if self._reading is None:
                self._reading = asyncio.ensure_future(self._read(now))
            # Shielded: a caller that goes away does not cancel the others' read.
            await asyncio.shield(self._reading)
        return self._ids is None or key_id in self._ids

    async def _read(self, now: float) -> frozenset[str] | None:
        try:
            self._ids = await self._load()
            self._read_at = now
            return self._ids
        finally:
            self._reading = None
