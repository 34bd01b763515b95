"""Several Redis primaries: which one holds a user (docs/protocol.md, "Shards").

Every user lives on one shard, a Redis primary with its own queue under the same
key names; a session's whole life (its lists, lock, cursor cache, jobs, events)
is on that one Redis. This module alone maps a user to a shard: nobody else
hashes.

The hash is rendezvous (highest random weight) over the shards' names: each
shard scores the user ``sha256(name || 0x00 || user_id)``'s first 8 bytes as a
big-endian unsigned integer; the highest score wins, a tie (never seen) to the
name first by bytes. A shard's URL may change (a failover) without moving
anyone; adding a shard moves only the users it now scores highest, about
1 / (shards + 1) of them, and only to it.

Adding a shard without losing or doubling a hand-over (docs/operations.md,
"Adding a shard") goes through two states of the new shard:

- pending: every process knows it; users still go to their old shard, whose
  hand-over script hands a user over there unless the user is marked moved
  (``stay``), which only a joining process does;
- joining: a moving user's hand-over goes to the old shard while the user holds
  an unfinished list there, and otherwise marks the user moved, atomically in
  the old shard's script (``hold``), and goes to the new one. So a user's lists
  are never on both shards, and the order of a session's lists is kept.

Once no moving user holds an unfinished list on an old shard (``memfleet shards
drain``), the new shard is deployed as settled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worker.errors import ConfigurationError

DEFAULT_SHARD = "default"  # worker.redis_shards.DEFAULT_SHARD (worker.config imports no package)
# How a moving user's hand-over treats the old shard (worker/protocol/lua/enqueue.lua).
STAY = "stay"  # the new shard is pending: here, unless the user is marked moved
HOLD = "hold"  # the new shard is joining: here while the user has unfinished lists here


def shard_score(shard: str, user_id: str) -> int:
    """The shard's score for the user: the first 8 bytes of SHA-256 over the shard's
    name, one zero byte and the user id (UTF-8), as a big-endian unsigned integer."""
    digest = hashlib.sha256(shard.encode() + b"\x00" + user_id.encode()).digest()
    return int.from_bytes(digest[:8], "big")


def owner(user_id: str, shards: Iterable[str]) -> str:
    """The shard that holds the user among ``shards``: the highest score; on a tie,
    the name first by its UTF-8 bytes."""
    best: str | None = None
    best_score = -1
    for name in shards:
        score = shard_score(name, user_id)
        if score > best_score or (score == best_score and best is not None
                                  and name.encode() < best.encode()):
            best, best_score = name, score
    if best is None:
        raise ConfigurationError("no shard to route to")
    return best


@dataclass(frozen=True, slots=True)
class Route:
    """Where a user's hand-over goes: ``home``, the shard among the settled ones;
    ``target``, among all (a new shard too). ``mode`` is None when they agree."""

    home: str
    target: str
    mode: str | None = None  # STAY or HOLD: how the home shard's script treats a mover

    @property
    def moving(self) -> bool:
        return self.home != self.target

    @property
    def shards(self) -> tuple[str, ...]:
        """Where the user's lists may be: the home shard, and the new one while moving."""
        return (self.home, self.target) if self.moving else (self.home,)


@dataclass(frozen=True, slots=True)
class ShardMap:
    """The shards in order, and the one being added (pending or joining), if any."""

    names: tuple[str, ...]
    pending: frozenset[str] = frozenset()
    joining: frozenset[str] = frozenset()

    @property
    def settled(self) -> tuple[str, ...]:
        return tuple(n for n in self.names if n not in self.pending | self.joining)

    def route(self, user_id: str) -> Route:
        home = owner(user_id, self.settled)
        target = owner(user_id, self.names)
        if home == target:
            return Route(home, target)
        return Route(home, target, HOLD if target in self.joining else STAY)

    @classmethod
    def from_settings(cls, settings: Any) -> ShardMap:
        names = tuple(name for name, _ in settings.redis_shard_entries)
        return cls(names, _names(settings.redis_shards_pending),
                   _names(settings.redis_shards_joining))


def _names(value: str | None) -> frozenset[str]:
    return frozenset((value or "").replace(",", " ").split())


class ShardedRedis:
    """One Redis client per shard, and the map that routes a user to one of them.

    What a chat server passes to worker.client's calls instead of a single client
    when the fleet has several Redis primaries; with one shard it behaves exactly
    as that shard's client alone.
    """

    def __init__(self, clients: Mapping[str, Any], *, pending: Iterable[str] = (),
                 joining: Iterable[str] = ()) -> None:
        if not clients:
            raise ConfigurationError("a sharded Redis needs at least one shard")
        self.map = ShardMap(tuple(clients), frozenset(pending), frozenset(joining))
        unknown = (self.map.pending | self.map.joining) - set(self.map.names)
        if unknown or not self.map.settled:
            raise ConfigurationError("pending and joining shards must be among the shards, "
                                     "and at least one shard settled")
        self._clients = dict(clients)

    @classmethod
    def from_urls(cls, urls: Mapping[str, str] | Sequence[tuple[str, str]], *,
                  pending: Iterable[str] = (), joining: Iterable[str] = (),
                  **redis_options: Any) -> ShardedRedis:
        """A client per shard URL (``redis_options`` go to each ``Redis.from_url``)."""
        from redis.asyncio import Redis

        pairs = list(urls.items()) if isinstance(urls, Mapping) else list(urls)
        return cls({name: Redis.from_url(url, **redis_options) for name, url in pairs},
                   pending=pending, joining=joining)

    @classmethod
    def from_settings(cls, settings: Any, **redis_options: Any) -> ShardedRedis:
        return cls.from_urls(settings.redis_shard_entries,
                             pending=_names(settings.redis_shards_pending),
                             joining=_names(settings.redis_shards_joining), **redis_options)

    def route(self, user_id: str) -> Route:
        return self.map.route(user_id)

    def client(self, shard: str) -> Any:
        return self._clients[shard]

    def for_user(self, user_id: str) -> Any:
        """The client of the user's home shard (where a settled user's keys are)."""
        return self._clients[self.route(user_id).home]

    def for_user_everywhere(self, user_id: str) -> list[Any]:
        """The clients of every shard that may hold the user's lists (two while moving)."""
        return [self._clients[name] for name in self.route(user_id).shards]

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(self._clients.items())

    @property
    def names(self) -> tuple[str, ...]:
        return self.map.names

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


def user_clients(redis: Any, user_id: str) -> list[Any]:
    """Every client that may hold the user's lists: a single client as it is."""
    return redis.for_user_everywhere(user_id) if isinstance(redis, ShardedRedis) else [redis]


def every_shard(redis: Any) -> list[tuple[str, Any]]:
    """(name, client) of every shard: a single client is the shard ``default``."""
    return list(redis.items()) if isinstance(redis, ShardedRedis) else [(DEFAULT_SHARD, redis)]
