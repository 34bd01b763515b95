"""The chat stand-in's conversation store: one Redis list of JSON messages per session.

A session belongs to the user who opened it. The memory API's erase uses
``erase_user`` too, so a forgotten user's conversations go with their facts.
"""

from __future__ import annotations

import json
from typing import Any

from worker import queue

SESSION_PREFIX = "chat:session:"
OWNER_PREFIX = "chat:owner:"
USER_SESSIONS_PREFIX = "chat:user-sessions:"

# KEYS: owner, messages, the user's session set. ARGV: user, user msg, answer msg, session.
# One round trip, atomic: a session belongs to the user who opened it; another
# user's turn is refused before anything is written.
_APPEND_TURN = """
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] then return false end
if not owner then redis.call('SET', KEYS[1], ARGV[1]) end
redis.call('SADD', KEYS[3], ARGV[4])
redis.call('RPUSH', KEYS[2], ARGV[2], ARGV[3])
return redis.call('LRANGE', KEYS[2], 0, -1)
"""

# KEYS: the user's session set. ARGV: user, then the key prefixes: owner,
# messages, and the hand-over's (latest list, its meta, older lists). Deletes
# only sessions the user still owns; returns how many.
_ERASE_USER = """
local sessions = redis.call('SMEMBERS', KEYS[1])
local n = 0
for _, sid in ipairs(sessions) do
  if redis.call('GET', ARGV[2] .. sid) == ARGV[1] then
    redis.call('DEL', ARGV[2] .. sid, ARGV[3] .. sid, ARGV[4] .. sid, ARGV[5] .. sid,
               ARGV[6] .. sid)
    n = n + 1
  end
end
redis.call('DEL', KEYS[1])
return n
"""


class ChatLog:
    """Appends turns and erases users' sessions, each in one atomic script call."""

    def __init__(self, redis: Any) -> None:
        self._append = redis.register_script(_APPEND_TURN)
        self._erase = redis.register_script(_ERASE_USER)

    async def append_turn(
        self, user_id: str, session_id: str, content: str, answer: str
    ) -> list[dict[str, str]] | None:
        """The session's whole list after this turn; None if another user owns the session."""
        raw = await self._append(
            keys=[OWNER_PREFIX + session_id, SESSION_PREFIX + session_id,
                  USER_SESSIONS_PREFIX + user_id],
            args=[user_id, json.dumps({"role": "user", "content": content}),
                  json.dumps({"role": "assistant", "content": answer}), session_id],
        )
        if raw is None:
            return None
        return [json.loads(item) for item in raw]

    async def erase_user(self, user_id: str) -> int:
        """Delete the user's sessions and their pending hand-overs; how many sessions went."""
        count: int = await self._erase(
            keys=[USER_SESSIONS_PREFIX + user_id],
            args=[user_id, OWNER_PREFIX, SESSION_PREFIX, queue.HANDOVER_PREFIX,
                  queue.META_PREFIX, queue.BACKLOG_PREFIX],
        )
        return count
