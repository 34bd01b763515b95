"""The chat stand-in's conversation store: one Redis list of JSON messages per session.

A session is the pair (user, session id), as everywhere in memfleet: each user
has their own namespace of session ids, so an id in use by another user is
neither visible nor taken (no probing, no squatting). Keys carry the user's
hash tag (worker.session_ref), so one user's keys share a Redis Cluster slot:

- ``chat:session:{<user>}:<session>``: the messages, the newest ``max_messages``;
- ``chat:sessions:{<user>}``: the user's session ids, for an erase.

Both expire ``ttl_s`` after the user's last turn. The memory API's erase uses
``erase_user`` too, so a forgotten user's conversations go with their facts.
"""

from __future__ import annotations

import json
from typing import Any

from worker.session_ref import SessionRef, user_tag

SESSION_PREFIX = "chat:session:"
USER_SESSIONS_PREFIX = "chat:sessions:"

# KEYS: the session's list, the user's session set. ARGV: user msg, answer msg,
# session id, most messages kept, ttl ms. One round trip, atomic. Returns the
# list and, first, the Redis clock (s, us) as it was read: the hand-over's
# listed_at_us (worker.client), so a list read before an erase stores nothing.
_APPEND_TURN = """
redis.call('RPUSH', KEYS[1], ARGV[1], ARGV[2])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[4]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
local time = redis.call('TIME')
return {time[1], time[2], redis.call('LRANGE', KEYS[1], 0, -1)}
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


def session_key(user_id: str, session_id: str) -> str:
    return SESSION_PREFIX + SessionRef(user_id, session_id).key


class ChatLog:
    """Appends turns and erases users' sessions, each in one atomic script call."""

    def __init__(self, redis: Any, *, max_messages: int, ttl_s: int) -> None:
        self._append = redis.register_script(_APPEND_TURN)
        self._erase = redis.register_script(_ERASE_USER)
        self._max_messages, self._ttl_ms = max_messages, ttl_s * 1000

    async def append_turn(
        self, user_id: str, session_id: str, content: str, answer: str
    ) -> list[dict[str, str]]:
        """The session's list after this turn (its newest ``max_messages``)."""
        return (await self.append_turn_listed(user_id, session_id, content, answer))[0]

    async def append_turn_listed(
        self, user_id: str, session_id: str, content: str, answer: str
    ) -> tuple[list[dict[str, str]], int]:
        """The list after this turn and when it was read (Redis clock, microseconds)."""
        seconds, micros, raw = await self._append(
            keys=[session_key(user_id, session_id), USER_SESSIONS_PREFIX + user_tag(user_id)],
            args=[json.dumps({"role": "user", "content": content}),
                  json.dumps({"role": "assistant", "content": answer}), session_id,
                  self._max_messages, self._ttl_ms],
        )
        return [json.loads(item) for item in raw], int(seconds) * 1_000_000 + int(micros)

    async def erase_user(self, user_id: str) -> int:
        """Delete the user's sessions; how many went."""
        count: int = await self._erase(
            keys=[USER_SESSIONS_PREFIX + user_tag(user_id)],
            args=[SESSION_PREFIX + user_tag(user_id) + ":"],
        )
        return count
