"""Who is calling: an end user (an HS256 JWT, worker.api.auth) or a chat server (a
service key, ``mfk_...``, worker.store.service_keys), and what each may do.

An end-user token acts for its own user only. A service key acts for any user
within its scopes: ``read`` the memory routes that only read, ``admin`` those
that change or hand out a user's memory (fact writes, consent, erase, export),
``handover`` the hand-over over HTTP (worker.api.handover_routes; a service key
only: an end user's token never hands over). docs/api.md maps every route to its
scope.

Each API process keeps what it read of a key for KEY_CACHE_TTL_S: a revoked key
stops working on every process within that many seconds, without a database
round trip on every request. Ids of no key are remembered for UNKNOWN_KEY_TTL_S,
and random ones cost a bounded number of queries (worker.api.key_cache). The secret
is checked on every request, against the cached hash, in constant time.
``last_used_at`` is written at most every LAST_USED_EVERY_S per key. Neither the
key nor its secret is ever logged: the log says the key's id and the refusal's class.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import AfterValidator

from worker.api.auth import InvalidToken, bearer_scheme, unauthorized, verify_token
from worker.api.fields import MAX_ID_CHARS, valid_id
from worker.api.key_cache import KeyIds, LookupBudget, TimedLru
from worker.store.service_keys import (
    ServiceKeyStore,
    StoredKey,
    looks_like_key,
    parse_key,
    secret_matches,
)

KEY_CACHE_TTL_S = 5.0
LAST_USED_EVERY_S = 60.0
_CACHE_MAX = 4096  # keys (and unknown ids) a process remembers; past it the least recent go
# An id of no key is answered without a query this long; so is every id missing
# from the snapshot of all ids once LOOKUPS_PER_WINDOW unseen ids were looked up
# within it. A key created elsewhere works at once, or within this under a flood.
UNKNOWN_KEY_TTL_S = 1.0
LOOKUPS_PER_WINDOW = 10
_MOST_KEY_IDS = 100_000  # past it no snapshot is held, and every unseen id is looked up

log = logging.getLogger("memfleet.api.auth")

# The classes of a refused service key, for the log.
MALFORMED_KEY = "malformed_key"
UNKNOWN_KEY = "unknown_key"
REVOKED_KEY = "revoked_key"
WRONG_SECRET = "wrong_secret"  # noqa: S105 - a class name, not a secret
# One reason for all of them: the caller learns nothing about which ids exist.
_KEY_REFUSED = "the service key is not valid (unknown, revoked or a wrong secret)"


@dataclass(frozen=True, slots=True)
class Caller:
    """An end user (``user_id``) or a service key (``key_id`` with ``scopes``)."""

    user_id: str | None = None
    key_id: str | None = None
    scopes: frozenset[str] = frozenset()


class ServiceKeyCheck:
    """One per API process: a presented key's scopes, or InvalidToken."""

    def __init__(self, store: ServiceKeyStore, *, ttl_s: float = KEY_CACHE_TTL_S,
                 last_used_every_s: float = LAST_USED_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store, self._every_s, self._clock = store, last_used_every_s, clock
        self._known: TimedLru[StoredKey] = TimedLru(_CACHE_MAX, ttl_s)
        self._unknown: TimedLru[bool] = TimedLru(_CACHE_MAX, UNKNOWN_KEY_TTL_S)
        self._budget = LookupBudget(LOOKUPS_PER_WINDOW, UNKNOWN_KEY_TTL_S)
        self._ids = KeyIds(lambda: store.key_ids(_MOST_KEY_IDS), UNKNOWN_KEY_TTL_S)
        self._touched: TimedLru[bool] = TimedLru(_CACHE_MAX, last_used_every_s)

    async def scopes(self, token: str) -> tuple[str, frozenset[str]]:
        """(key id, scopes) of a valid key."""
        parts = parse_key(token)
        if parts is None:
            raise InvalidToken(MALFORMED_KEY, "the service key is not of the form "
                               "mfk_<12 hex digits>_<64 hex digits>")
        key_id, secret = parts
        stored = await self._stored(key_id)
        if stored is None:
            raise InvalidToken(UNKNOWN_KEY, _KEY_REFUSED)
        if not secret_matches(secret, stored.secret_hash):
            raise InvalidToken(WRONG_SECRET, _KEY_REFUSED)
        if stored.revoked:
            raise InvalidToken(REVOKED_KEY, _KEY_REFUSED)
        await self._touch(key_id)
        return key_id, stored.scopes

    async def _stored(self, key_id: str) -> StoredKey | None:
        now = self._clock()
        known = self._known.get(key_id, now)
        if known is not None:
            return known
        if self._unknown.get(key_id, now):
            return None
        # A key read before is read again (its revocation); an unseen id is read while
        # such reads are few, else only when the snapshot of all ids holds it.
        seen = key_id in self._known or self._budget.take(now)
        if not seen and not await self._ids.may_exist(key_id, now):
            self._unknown.put(key_id, True, now)
            return None
        stored = await self._store.stored(key_id)
        if stored is None:
            self._unknown.put(key_id, True, now)
        else:
            self._known.put(key_id, stored, now)
        return stored

    async def _touch(self, key_id: str) -> None:
        now = self._clock()
        if self._touched.get(key_id, now):
            return
        self._touched.put(key_id, True, now)
        await self._store.touch(key_id, self._every_s)


def _refused(exc: InvalidToken) -> HTTPException:
    # The class and the fixed words; the access log's line names the route.
    log.info("memory API: 401 invalid_token (%s): %s", exc.kind, exc)
    return unauthorized(str(exc))


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Caller:
    """The request's verified caller, or 401."""
    if credentials is None:
        log.info("memory API: 401: no bearer token")
        raise unauthorized(None)
    token = credentials.credentials
    try:
        if looks_like_key(token):
            check: ServiceKeyCheck = request.app.state.service_keys
            key_id, scopes = await check.scopes(token)
            return Caller(key_id=key_id, scopes=scopes)
        return Caller(user_id=verify_token(request.app.state.auth, token))
    except InvalidToken as exc:
        raise _refused(exc) from None


UserInPath = Annotated[str, Path(
    min_length=1, max_length=MAX_ID_CHARS,
    description="The user: the token's subject, or any user for a service key whose "
                "scopes allow the route."), AfterValidator(valid_id)]
CallerOf = Annotated[Caller, Depends(caller)]


def _for_user(scope: str) -> Callable[..., object]:
    async def user_in_path(user_id: UserInPath, who: CallerOf) -> str:
        if who.key_id is not None:
            if scope not in who.scopes:
                log.info("memory API: 403: service key %s lacks the %s scope",
                         who.key_id, scope)
                raise HTTPException(status.HTTP_403_FORBIDDEN,
                                    detail=f"the service key lacks the {scope} scope")
            return user_id
        if user_id != who.user_id:
            # Same answer whether or not the other user exists or has facts.
            raise HTTPException(status.HTTP_403_FORBIDDEN,
                                detail="the token is not for this user")
        return user_id

    return user_in_path


async def _handing_over_user(user_id: UserInPath, who: CallerOf) -> str:
    # A chat server hands its users' turns over; an end user holding a token must
    # not be able to feed memory any conversation they like, so no token does.
    if who.key_id is None:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            detail="an end user's token cannot hand over; use a service key "
                                   "with the handover scope")
    if "handover" not in who.scopes:
        log.info("memory API: 403: service key %s lacks the handover scope", who.key_id)
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            detail="the service key lacks the handover scope")
    return user_id


# What a chat server that hands over may also do: follow what became of it.
WATCH_SCOPES = frozenset({"handover", "read"})


def _lacks_watch_scope(who: Caller) -> HTTPException:
    log.info("memory API: 403: service key %s has neither the handover nor the read scope",
             who.key_id)
    return HTTPException(status.HTTP_403_FORBIDDEN,
                         detail="the service key has neither the handover nor the read scope")


async def _watching_user(user_id: UserInPath, who: CallerOf) -> str:
    if who.key_id is not None:
        if not who.scopes & WATCH_SCOPES:
            raise _lacks_watch_scope(who)
        return user_id
    if user_id != who.user_id:
        raise HTTPException(status.HTTP_403_FORBIDDEN, detail="the token is not for this user")
    return user_id


async def _event_reader(who: CallerOf) -> str:
    # The events name every user's sessions (by stand-in): a service's view, no user's.
    if who.key_id is None:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            detail="an end user's token cannot read the commit events; use a "
                                   "service key with the handover or read scope")
    if not who.scopes & WATCH_SCOPES:
        raise _lacks_watch_scope(who)
    return who.key_id


reading_user = _for_user("read")
administered_user = _for_user("admin")

# The path's user, once the caller may read (ReadUser) or change (AdminUser) their memory.
ReadUser = Annotated[str, Depends(reading_user)]
AdminUser = Annotated[str, Depends(administered_user)]
# The path's user, once the caller is a service key with the handover scope.
HandoverUser = Annotated[str, Depends(_handing_over_user)]
# The path's user, once the caller may follow their sessions' memory: a service key
# with the handover or read scope, or the user's own token.
WatchUser = Annotated[str, Depends(_watching_user)]
# The id of a service key with the handover or read scope (no end user's token).
EventReader = Annotated[str, Depends(_event_reader)]
