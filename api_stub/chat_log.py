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
from worker.protocol.session_ref import SessionRef

# KEYS: the session's list, the user's session set. ARGV: user msg, answer msg,
# session id, most messages kept, ttl ms, most bytes kept (0: no byte bound).
# One round trip, atomic. The byte bound keeps the newest messages whose JSON
# fits it (never fewer than this turn's two): no more than a hand-over sends.
# Returns the Redis clock (s, us) as the list was read, then the list: the
# hand-over's listed_at_us (worker.client.handover), so a list read before an erase stores nothing.
_APPEND_TURN = """
redis.call('RPUSH', KEYS[1], ARGV[1], ARGV[2])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[4]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local max_bytes = tonumber(ARGV[6])
if max_bytes > 0 then
  local total, keep = 0, 0
  for i = #items, 1, -1 do
    total = total + string.len(items[i])
    if total > max_bytes and keep >= 2 then break end
    keep = keep + 1
  end
  if keep < #items then
    redis.call('LTRIM', KEYS[1], -keep, -1)
    items = redis.call('LRANGE', KEYS[1], 0, -1)
  end
end
local time = redis.call('TIME')
return {time[1], time[2], items}
"""

# KEYS: the user's session set. ARGV: the prefix of the user's session lists
# (through the hash tag and ':'). Returns how many sessions went.
_ERASE_USER = """
local n = 0
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  n = n + redis.call('DEL', ARGV[1] .. sid)
end
redis.call('DEL', KEYS[1])
return n
"""


# KEYS: the session's list. ARGV: the turn's user msg and answer msg, as appended.
# Takes back the last occurrence of each (a turn whose hand-over was refused).
_TAKE_BACK_TURN = """
redis.call('LREM', KEYS[1], -1, ARGV[2])
return redis.call('LREM', KEYS[1], -1, ARGV[1])
"""


def _item(role: str, content: str) -> str:
    # Non-ASCII as UTF-8, not escaped: an astral character escaped is 12 bytes.
    return json.dumps({"role": role, "content": content}, ensure_ascii=False)


def session_key(user_id: str, session_id: str) -> str:
    return chat_session_key(SessionRef(user_id, session_id))


class ChatLog:
    """Appends turns and erases users' sessions, each in one atomic script call."""

    def __init__(self, redis: Any, *, max_messages: int, ttl_s: int) -> None:
        self._append = redis.register_script(_APPEND_TURN)
        self._erase = redis.register_script(_ERASE_USER)
        self._take_back = redis.register_script(_TAKE_BACK_TURN)
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
        seconds, micros, raw = await self._append(
            keys=[session_key(user_id, session_id), chat_sessions_key(user_id)],
            args=[_item("user", content), _item("assistant", answer), session_id,
                  self._max_messages, self._ttl_ms, max_bytes],
        )
        return [json.loads(item) for item in raw], int(seconds) * 1_000_000 + int(micros)

    async def take_back_turn(self, user_id: str, session_id: str, content: str,
                             answer: str) -> None:
        """Remove a turn ``append_turn`` stored (its hand-over was refused: the
        turn is refused as a whole and the client sends it again)."""
        await self._take_back(keys=[session_key(user_id, session_id)],
                              args=[_item("user", content), _item("assistant", answer)])

    async def erase_user(self, user_id: str) -> int:
        """Delete the user's sessions; how many went."""
        count: int = await self._erase(
            keys=[chat_sessions_key(user_id)],
            args=[user_session_prefix(CHAT_SESSION_PREFIX, user_id)],
        )
        return count
