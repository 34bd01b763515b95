"""The chat stand-in's conversation store: one Redis list of JSON messages per session.

A session is the pair (user, session id), as everywhere in memfleet: each user
has their own namespace of session ids, so an id in use by another user is
neither visible nor taken (no probing, no squatting). Keys carry the user's
hash tag (worker.protocol.session_ref), so one user's keys share a Redis Cluster slot:

- ``chat:session:{<user>}:<session>``: the messages, the newest ``max_messages``
  (and, when a byte bound is given, the newest that fit it);
- ``chat:sessions:{<user>}``: the user's session ids, for an erase.

Both expire ``ttl_s`` after the user's last turn. The memory API's erase uses
``erase_user`` too, so a forgotten user's conversations go with their facts.
"""

from __future__ import annotations

import json
from typing import Any

from worker.protocol.keys import (
    CHAT_SESSION_PREFIX,
    chat_session_key,
    chat_sessions_key,
    user_session_prefix,
)
from worker.protocol.scripts import LuaScript
from worker.protocol.session_ref import SessionRef

# Each script opens with its KEYS and ARGV.
_APPEND_TURN = LuaScript("api_stub", "chat_append_turn.lua")
_ERASE_USER = LuaScript("api_stub", "chat_erase_user.lua")
_TAKE_BACK_TURN = LuaScript("api_stub", "chat_take_back_turn.lua")


def _item(role: str, content: str) -> str:
    # Non-ASCII as UTF-8, not escaped: an astral character escaped is 12 bytes.
    return json.dumps({"role": role, "content": content}, ensure_ascii=False)


def session_key(user_id: str, session_id: str) -> str:
    return chat_session_key(SessionRef(user_id, session_id))


class ChatLog:
    """Appends turns and erases users' sessions, each in one atomic script call."""

    def __init__(self, redis: Any, *, max_messages: int, ttl_s: int) -> None:
        self._redis = redis
        self._max_messages, self._ttl_ms = max_messages, ttl_s * 1000

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
        await _TAKE_BACK_TURN(self._redis, [session_key(user_id, session_id)],
                              [_item("user", content), _item("assistant", answer)])

    async def erase_user(self, user_id: str) -> int:
        """Delete the user's sessions; how many went."""
        count = await _ERASE_USER(self._redis, [chat_sessions_key(user_id)],
                                  [user_session_prefix(CHAT_SESSION_PREFIX, user_id)])
        return int(count)
