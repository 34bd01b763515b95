"""A service key's check in one API process: the key's format, the secret compared in
constant time against its hash, what is read of a key kept KEY_CACHE_TTL_S (so a
revocation lands within it) in a cache that evicts the least recent key, ids of no
key answered without a query within a budget and a snapshot of every id, last_used
written at most every LAST_USED_EVERY_S."""

from __future__ import annotations

import ast
import asyncio
import inspect
import secrets
from dataclasses import dataclass, field
from typing import Any

import pytest

from worker.api.auth import InvalidToken
from worker.api.service_auth import (
    KEY_CACHE_TTL_S,
    LAST_USED_EVERY_S,
    LOOKUPS_PER_WINDOW,
    UNKNOWN_KEY_TTL_S,
    ServiceKeyCheck,
)
from worker.errors import MemfleetError
from worker.store import service_keys
from worker.store.service_keys import (
    StoredKey,
    parse_key,
    secret_hash,
    secret_matches,
    valid_key_id,
    valid_scopes,
)

ID, SECRET = "0123456789ab", "f" * 64
KEY = f"mfk_{ID}_{SECRET}"


@dataclass
class FakeKeys:
    revoked: bool = False
    reads: int = 0
    touches: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=lambda: {ID})
    id_reads: int = 0

    async def stored(self, key_id: str) -> StoredKey | None:
        self.reads += 1
        return StoredKey(secret_hash(SECRET), frozenset({"read"}), self.revoked) \
            if key_id in self.ids else None

    async def key_ids(self, most: int) -> frozenset[str] | None:
        self.id_reads += 1
        await asyncio.sleep(0)  # a round trip: concurrent callers meet here
        return frozenset(self.ids) if len(self.ids) <= most else None

    async def touch(self, key_id: str, every_s: float) -> None:
        self.touches.append(key_id)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def check(keys: FakeKeys, clock: Clock) -> ServiceKeyCheck:
    store: Any = keys
    return ServiceKeyCheck(store, clock=clock)


def test_a_key_is_prefix_id_and_secret() -> None:
    assert parse_key(KEY) == (ID, SECRET)
    for bad in ("mfk_", KEY + "0", KEY.upper(), f"mfk_{ID}{SECRET}", f"mfk_{ID[:-1]}_{SECRET}0",
                f"mfk_{ID}_{SECRET}\n"):
        assert parse_key(bad) is None, bad
    assert secret_matches(SECRET, secret_hash(SECRET))
    assert not secret_matches("e" + SECRET[1:], secret_hash(SECRET))


def test_the_secret_is_compared_in_constant_time() -> None:
    # Code review as a test: the digests meet only in hmac.compare_digest.
    tree = ast.parse(inspect.getsource(service_keys.secret_matches))
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "hmac.compare_digest" in calls
    assert not any(isinstance(n, ast.Compare) for n in ast.walk(tree))


def test_scopes_and_ids_are_checked() -> None:
    assert valid_scopes("admin, read,read") == ("read", "admin")
    for bad in ("", ",", "read,root", "READ"):
        with pytest.raises(MemfleetError, match="--scope takes"):
            valid_scopes(bad)
    assert valid_key_id(ID) == ID
    with pytest.raises(MemfleetError, match="12 hex digits"):
        valid_key_id(KEY)


async def test_a_revocation_lands_once_the_cached_key_is_older_than_the_ttl() -> None:
    keys, clock = FakeKeys(), Clock()
    checker = check(keys, clock)
    assert await checker.scopes(KEY) == (ID, frozenset({"read"}))
    keys.revoked = True
    clock.now += KEY_CACHE_TTL_S - 0.1
    assert await checker.scopes(KEY) == (ID, frozenset({"read"}))  # still cached
    assert keys.reads == 1
    clock.now += 0.2
    with pytest.raises(InvalidToken) as refused:
        await checker.scopes(KEY)
    assert refused.value.kind == "revoked_key" and keys.reads == 2


async def test_a_wrong_secret_is_refused_even_from_the_cache() -> None:
    keys, clock = FakeKeys(), Clock()
    checker = check(keys, clock)
    await checker.scopes(KEY)
    with pytest.raises(InvalidToken) as refused:
        await checker.scopes(f"mfk_{ID}_{'e' * 64}")
    assert refused.value.kind == "wrong_secret" and keys.reads == 1
    with pytest.raises(InvalidToken) as unknown:
        await checker.scopes(f"mfk_{'1' * 12}_{SECRET}")
    assert unknown.value.kind == "unknown_key"
    assert str(unknown.value) == str(refused.value)  # one reason for both


async def test_last_used_is_written_at_most_every_interval() -> None:
    keys, clock = FakeKeys(), Clock()
    checker = check(keys, clock)
    for _ in range(5):
        await checker.scopes(KEY)
        clock.now += 1
    assert keys.touches == [ID]
    clock.now += LAST_USED_EVERY_S
    await checker.scopes(KEY)
    assert keys.touches == [ID, ID]


def key_of(key_id: str) -> str:
    return f"mfk_{key_id}_{SECRET}"


def random_key() -> str:
    return f"mfk_{secrets.token_hex(6)}_{secrets.token_hex(32)}"


async def refused(checker: ServiceKeyCheck, key: str) -> str:
    with pytest.raises(InvalidToken) as caught:
        await checker.scopes(key)
    return caught.value.kind


async def test_a_full_cache_evicts_the_least_recent_key_not_every_key() -> None:
    ids = [f"{i:012x}" for i in range(4097)]
    keys, clock = FakeKeys(ids=set(ids)), Clock()
    checker = check(keys, clock)
    for key_id in ids[:4096]:
        await checker.scopes(key_of(key_id))
    await checker.scopes(key_of(ids[0]))  # the oldest, used again: now the most recent
    reads = keys.reads
    await checker.scopes(key_of(ids[4096]))  # one over: ids[1], the least recent, goes
    await checker.scopes(key_of(ids[0]))
    assert keys.reads == reads + 1, "the rest of the cache was kept"
    await checker.scopes(key_of(ids[1]))
    assert keys.reads == reads + 2


async def test_random_unknown_ids_cost_the_budget_and_one_snapshot_per_window() -> None:
    keys, clock = FakeKeys(), Clock()
    checker = check(keys, clock)
    for _ in range(300):
        assert await refused(checker, random_key()) == "unknown_key"
    assert (keys.reads, keys.id_reads) == (LOOKUPS_PER_WINDOW, 1)
    clock.now += UNKNOWN_KEY_TTL_S
    for _ in range(300):
        await refused(checker, random_key())
    assert (keys.reads, keys.id_reads) == (2 * LOOKUPS_PER_WINDOW, 2)


async def test_callers_waiting_for_the_snapshot_share_one_read() -> None:
    keys, clock = FakeKeys(), Clock()
    checker = check(keys, clock)
    for _ in range(LOOKUPS_PER_WINDOW):
        await refused(checker, random_key())
    kinds = await asyncio.gather(*(refused(checker, random_key()) for _ in range(50)))
    assert set(kinds) == {"unknown_key"} and keys.id_reads == 1


async def test_an_unknown_id_is_remembered_briefly_and_a_key_made_later_works() -> None:
    keys, clock = FakeKeys(), Clock()
    checker = check(keys, clock)
    later = "abcdef012345"
    await refused(checker, key_of(later))
    await refused(checker, key_of(later))
    assert keys.reads == 1, "the second refusal came from the negative cache"
    keys.ids.add(later)  # created since, by `memfleet keys create` on another machine
    clock.now += UNKNOWN_KEY_TTL_S
    assert await checker.scopes(key_of(later)) == (later, frozenset({"read"}))


async def test_a_key_created_during_a_flood_works_within_the_snapshot_lifetime() -> None:
    keys, clock = FakeKeys(), Clock()
    checker = check(keys, clock)
    for _ in range(LOOKUPS_PER_WINDOW + 1):  # the budget spent, the snapshot read
        await refused(checker, random_key())
    created = "0a0b0c0d0e0f"
    keys.ids.add(created)
    assert await refused(checker, key_of(created)) == "unknown_key"
    clock.now += UNKNOWN_KEY_TTL_S
    assert await checker.scopes(key_of(created)) == (created, frozenset({"read"}))
    # A known key is read again for its revocation, budget or no budget.
    keys.revoked = True
    clock.now += KEY_CACHE_TTL_S
    for _ in range(LOOKUPS_PER_WINDOW):
        await refused(checker, random_key())
    assert await refused(checker, key_of(created)) == "revoked_key"
