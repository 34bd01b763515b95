"""Service keys: the credentials of chat servers, which act for all their users.

A key reads ``mfk_<id>_<secret>``: a prefix a log scanner or a person recognises,
12 hex digits of id (how the key is found, and what ``memfleet keys`` shows and
revokes), and 64 hex digits of secret (256 random bits). The table keeps only
sha256 of the secret. A slow or keyed hash buys nothing here: those protect
guessable secrets (passwords) from a stolen table, and 2**256 secrets are not
guessable; a keyed hash would add a second secret to deploy to every API process
for no gain. The check compares digests with ``hmac.compare_digest``, so the time
it takes says nothing about how much of a guess was right.

``service_key`` is the one table not scoped to a user (schema/0010_service_keys.sql).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from worker.errors import MemfleetError, StoreError
from worker.store import queries
from worker.store.pool import PooledStore

PREFIX = "mfk_"
SCOPES = ("handover", "read", "admin")
MAX_NAME_CHARS = 100
_ID = re.compile(r"^[0-9a-f]{12}$")
# A database that fails or is away: a StoreError (the API answers 503).
_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)
_KEY = re.compile(r"^mfk_([0-9a-f]{12})_([0-9a-f]{64})$")


@dataclass(frozen=True, slots=True)
class ServiceKeyRow:
    """What ``memfleet keys list`` shows: never the secret, nor its hash."""

    id: str
    name: str
    scopes: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def of(cls, row: Any) -> ServiceKeyRow:
        return cls(row["id"], row["name"], tuple(row["scopes"]), row["created_at"],
                   row["last_used_at"], row["revoked_at"])


@dataclass(frozen=True, slots=True)
class StoredKey:
    """What the API checks a presented key against."""

    secret_hash: bytes
    scopes: frozenset[str]
    revoked: bool


def looks_like_key(token: str) -> bool:
    """A bearer token meant as a service key (then never tried as a JWT)."""
    return token.startswith(PREFIX)


def parse_key(token: str) -> tuple[str, str] | None:
    """(id, secret) of a well-formed key, else None."""
    match = _KEY.fullmatch(token)
    return None if match is None else (match[1], match[2])


def secret_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("ascii")).digest()


def secret_matches(secret: str, stored: bytes) -> bool:
    return hmac.compare_digest(secret_hash(secret), stored)


def valid_scopes(text: str) -> tuple[str, ...]:
    """``handover,read`` as a tuple in SCOPES' order; MemfleetError on anything else."""
    asked = [part.strip() for part in text.split(",") if part.strip()]
    unknown = sorted(set(asked) - set(SCOPES))
    if unknown or not asked:
        raise MemfleetError(f"--scope takes a comma-separated list of {', '.join(SCOPES)}"
                            + (f" (not {', '.join(unknown)})" if unknown else ""))
    return tuple(s for s in SCOPES if s in asked)


def valid_name(text: str) -> str:
    name = text.strip()
    if not name or len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise MemfleetError(f"--name takes 1 to {MAX_NAME_CHARS} printable characters")
    return name


def valid_key_id(text: str) -> str:
    if not _ID.fullmatch(text):
        raise MemfleetError(f"a key id is 12 hex digits (as `memfleet keys list` shows), "
                            f"not {text[:40]!r}")
    return text


class ServiceKeyStore(PooledStore):
    """The SQL of service keys; every method one statement."""

    def __init__(self, pool: Any) -> None:
        super().__init__(pool)
        self._sql = queries.load("service_keys")

    async def create(self, name: str, scopes: tuple[str, ...]) -> tuple[ServiceKeyRow, str]:
        """The new key's row and the key itself, which is never seen again."""
        name = valid_name(name)
        key_id, secret = secrets.token_hex(6), secrets.token_hex(32)
        row = await self._one("create_key", key_id, name, secret_hash(secret), list(scopes))
        return ServiceKeyRow.of(row), f"{PREFIX}{key_id}_{secret}"

    async def list(self) -> list[ServiceKeyRow]:
        try:
            rows = await self._pool.fetch(self._sql["list_keys"])
        except _FAILURES as exc:
            raise StoreError(f"service keys: {exc}") from exc
        return [ServiceKeyRow.of(r) for r in rows]

    async def revoke(self, key_id: str) -> tuple[ServiceKeyRow, bool] | None:
        """The key's row and whether it was revoked already; None: no such key."""
        row = await self._one("revoke_key", key_id)
        return None if row is None else (ServiceKeyRow.of(row), row["was_revoked"])

    async def stored(self, key_id: str) -> StoredKey | None:
        row = await self._one("key_for_check", key_id)
        if row is None:
            return None
        return StoredKey(bytes(row["secret_hash"]), frozenset(row["scopes"]), row["revoked"])

    async def key_ids(self, most: int) -> frozenset[str] | None:
        """Every key's id; None when there are more than ``most``."""
        try:
            rows = await self._pool.fetch(self._sql["key_ids"], most + 1)
        except asyncpg.UndefinedTableError:
            raise StoreError("the database has no service_key table: run `memfleet migrate`"
                             ) from None
        except _FAILURES as exc:
            raise StoreError(f"service keys: {exc}") from exc
        return None if len(rows) > most else frozenset(row["id"] for row in rows)

    async def touch(self, key_id: str, every_s: float) -> None:
        try:
            await self._pool.execute(self._sql["touch_key"], key_id, float(every_s))
        except _FAILURES as exc:
            raise StoreError(f"service keys: {exc}") from exc

    async def _one(self, name: str, *args: Any) -> Any:
        try:
            return await self._pool.fetchrow(self._sql[name], *args)
        except asyncpg.UndefinedTableError:
            raise StoreError("the database has no service_key table: run `memfleet migrate`"
                             ) from None
        except _FAILURES as exc:
            raise StoreError(f"service keys: {exc}") from exc
