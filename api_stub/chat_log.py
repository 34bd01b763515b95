"""The chat stand-in's conversation store: one Redis list of JSON messages per session.

A session is the pair (user, session id), as everywhere in memfleet: each user
has their own namespace of session ids, so an id in use by another user is
neither visible nor taken (no probing, no squatting). Keys carry the user's
hash tag (worker.protocol.keys.user_tag), so one user's keys share a Redis Cluster slot:

- ``chat:session:{<user>}:<session>``: the messages, the newest ``max_messages``
  (and, when a byte bound is given, the newest that fit it);
- ``chat:sessions:{<user>}``: the user's session ids by their last turn, for the
  cap on sessions and an erase;
- ``chat:turns:{<user>}``: the user's turn rate.

The lists and the ids expire ``ttl_s`` after the last turn. ``admit_turn`` runs
before a turn is answered (the answer is a model's spend): the user's sessions
with a turn within ``ttl_s`` are capped at ``max_sessions`` (a session already
counted always goes on) and their turns at ``turns_per_minute`` on average, up to
``turn_burst`` at once. The memory API's erase uses ``erase_user`` too (an erase
hook, api_stub.chat_app), so a forgotten user's conversations go with their facts,
whether the stand-in's routes are mounted or not.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from worker.api.settings import ApiSettings
from worker.protocol.keys import (
    CHAT_SESSION_PREFIX,
    SessionRef,
    chat_sessions_key,
    chat_turns_key,
    user_session_prefix,
)
from worker.protocol.scripts import LuaScript

# Each script opens with its KEYS and ARGV.
_ADMIT_TURN = LuaScript("api_stub", "chat_admit_turn.lua")
_APPEND_TURN = LuaScript("api_stub", "chat_append_turn.lua")
_ERASE_USER = LuaScript("api_stub", "chat_erase_user.lua")
_TAKE_BACK_TURN = LuaScript("api_stub", "chat_take_back_turn.lua")


def _item(role: str, content: str) -> str:
    # Non-ASCII as UTF-8, not escaped: an astral character escaped is 12 bytes.
    return json.dumps({"role": role, "content": content}, ensure_ascii=False)


def session_key(user_id: str, session_id: str) -> str:
    return SessionRef(user_id, session_id).chat_session_key


@dataclass(frozen=True, slots=True)
class TurnRefused:
    """Why ``admit_turn`` refused a turn (``error``, for the 429's body) and when to
    send it again (``retry_after_s``)."""

    error: str
    detail: str
    retry_after_s: int


class ChatLog:
    """Admits, appends and takes back turns and erases users' sessions, each in one
    atomic script call."""

    def __init__(self, redis: Any, *, max_messages: int, ttl_s: int, max_sessions: int = 16,
                 turns_per_minute: int = 0, turn_burst: int = 1) -> None:
        self._redis = redis
        self._max_messages, self._ttl_ms = max_messages, ttl_s * 1000
        self._max_sessions, self._burst = max_sessions, turn_burst
        self._interval_ms = 0 if turns_per_minute == 0 else max(1, round(60_000 /
                                                                         turns_per_minute))

    @classmethod
    def from_settings(cls, redis: Any, settings: ApiSettings) -> ChatLog:
        return cls(redis, max_messages=settings.max_messages, ttl_s=settings.chat_ttl_s,
                   max_sessions=settings.chat_sessions_per_user,
                   turns_per_minute=settings.chat_turns_per_minute,
                   turn_burst=settings.chat_turn_burst)

    async def admit_turn(self, user_id: str, session_id: str) -> TurnRefused | None:
        """None when the turn may be answered (its session counted from now), else why
        not; nothing is changed then."""
        refused, wait_ms = await _ADMIT_TURN(
            self._redis, [chat_sessions_key(user_id), chat_turns_key(user_id)],
            [session_id, self._max_sessions, self._ttl_ms, self._interval_ms, self._burst])
        retry_after_s = max(1, math.ceil(int(wait_ms) / 1000))
        if int(refused) == 1:
            return TurnRefused("ChatSessionsFull",
                               f"the user has {self._max_sessions} chat sessions with a turn"
                               " within their lifetime; a new one may start after Retry-After",
                               retry_after_s)
        if int(refused) == 2:
            return TurnRefused("ChatTurnsTooFast", "too many chat turns; retry later",
                               retry_after_s)
        return None

    async def history(self, user_id: str, session_id: str) -> list[dict[str, str]]:
        """The session's messages so far, oldest first (none once it expired)."""
        raw = await self._redis.lrange(session_key(user_id, session_id), 0, -1)
        return [json.loads(item) for item in raw]

    async def append_turn(
        self, user_id: str, session_id: str, content: str, answer: str, *,
        max_bytes: int = 0,
    ) -> list[dict[str, str]]:
        """The session's list after this turn (its newest ``max_messages``, and of
        them the newest whose JSON fits ``max_bytes`` when it is not 0)."""
        return (await self.append_turn_listed(user_id, session_id, content, answer,
                                              max_bytes=max_bytes))[0]

    async def append_turn_listed(
        self, user_id: str, session_id: str, content: str, answer: str, *,
        max_bytes: int = 0,
    ) -> tuple[list[dict[str, str]], int]:
        """The list after this turn and when it was read (Redis clock, microseconds)."""
        seconds, micros, raw = await _APPEND_TURN(
            self._redis, [session_key(user_id, session_id), chat_sessions_key(user_id)],
            [_item("user", content), _item("assistant", answer), session_id,
             self._max_messages, self._ttl_ms, max_bytes],
        )
        return [json.loads(item) for item in raw], int(seconds) * 1_000_000 + int(micros)

    async def take_back_turn(self, user_id: str, session_id: str, content: str,
                             answer: str) -> None:
        """Remove a turn ``append_turn`` stored (its hand-over was refused: the
        turn is refused as a whole and the client sends it again)."""
        await _TAKE_BACK_TURN(self._redis, [session_key(user_id, session_id),
                                            chat_sessions_key(user_id)],
                              [_item("user", content), _item("assistant", answer), session_id])

    async def erase_user(self, user_id: str) -> int:
        """Delete the user's sessions; how many went."""
        count = await _ERASE_USER(self._redis, [chat_sessions_key(user_id),
                                                chat_turns_key(user_id)],
                                  [user_session_prefix(CHAT_SESSION_PREFIX, user_id)])
        return int(count)
