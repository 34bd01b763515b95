"""A service key's check in one API process: the key's format, the secret compared in
constant time against its hash, what is read of a key kept KEY_CACHE_TTL_S (so a
revocation lands within it), last_used written at most every LAST_USED_EVERY_S."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from typing import Any

import pytest

from api_stub.auth import InvalidToken
from api_stub.service_auth import KEY_CACHE_TTL_S, LAST_USED_EVERY_S, ServiceKeyCheck
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

    async def stored(self, key_id: str) -> StoredKey | None:
        self.reads += 1
        return StoredKey(secret_hash(SECRET), frozenset({"read"}), self.revoked) \
            if key_id == ID else None

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
