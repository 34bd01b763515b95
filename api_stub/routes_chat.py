"""The chat stand-in: what a chat server's turn looks like with memfleet done right.

1. store the user's message in the session's list,
2. read memory into the prompt (the read path) and answer (canned here),
3. hand the whole list over with ``schedule_memory_persistence``, after the
   answer exists and without waiting for any memory work,
4. return the answer. A Redis outage or a refused hand-over never fails the turn.

X-Memory-Handover-Ms says how long step 3 took, the latency memory adds to a turn.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Request, Response, status
from pydantic import AfterValidator
from redis.exceptions import RedisError

from api_stub.auth import TokenSubject
from api_stub.deps import ApiDeps
from api_stub.errors import AUTH_RESPONSES, error_responses
from api_stub.models import MAX_ID_CHARS, ChatBody, ChatReply, clean_text
from worker import queue
from worker.client import schedule_memory_persistence
from worker.errors import HandoverUnavailable, InvalidHandover, StoreError
from worker.read import known_facts

log = logging.getLogger("memfleet.api.chat")

HANDOVER_HEADER = "X-Memory-Handover-Ms"
SESSION_PREFIX = "chat:session:"
OWNER_PREFIX = "chat:owner:"
USER_SESSIONS_PREFIX = "chat:user-sessions:"
CANNED_ANSWER = "Thanks, noted. (memfleet's chat stand-in answers every turn the same way.)"

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

# KEYS: the user's session set. ARGV: user, the three key prefixes. Deletes
# only sessions the user still owns; returns how many.
_ERASE_USER = """
local sessions = redis.call('SMEMBERS', KEYS[1])
local n = 0
for _, sid in ipairs(sessions) do
  if redis.call('GET', ARGV[2] .. sid) == ARGV[1] then
    redis.call('DEL', ARGV[2] .. sid, ARGV[3] .. sid, ARGV[4] .. sid)
    n = n + 1
  end
end
redis.call('DEL', KEYS[1])
return n
"""


class ChatLog:
    """The stand-in's conversation store: one Redis list of JSON messages per session."""

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
            args=[user_id, OWNER_PREFIX, SESSION_PREFIX, queue.HANDOVER_PREFIX],
        )
        return count


router = APIRouter(tags=["chat"])


SessionId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(clean_text)
]


@router.post(
    "/chat/{session_id}",
    response_model=ChatReply,
    responses={
        **AUTH_RESPONSES,
        **error_responses(400, 404, 503),
        200: {"headers": {HANDOVER_HEADER: {
            "description": "Milliseconds the memory hand-over added to this turn.",
            "schema": {"type": "string"},
        }}},
    },
    summary="One chat turn of the token's user (stores, answers, hands over)",
)
async def chat_turn(
    request: Request,
    response: Response,
    session_id: SessionId,
    body: ChatBody,
    user_id: TokenSubject,
) -> ChatReply:
    deps: ApiDeps = request.app.state.deps
    try:
        facts = await known_facts(deps.memory, deps.providers.embedder, user_id,
                                  query=body.content, top_k=deps.settings.read_top_k)
    except StoreError:
        # Memory is an extra: the turn goes on without it.
        log.warning("chat: memory read failed; answering without it")
        facts = []
    # A real chat server would put format_block(facts) in the prompt and call its model here.
    answer = CANNED_ANSWER
    try:
        messages = await deps.chat.append_turn(user_id, session_id, body.content, answer)
    except RedisError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            detail="the conversation store is unavailable") from exc
    if messages is None:
        # Another user's session: the same answer as a session that does not exist.
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no such session")

    started = time.perf_counter()
    outcome: Literal["scheduled", "unavailable", "refused"] = "scheduled"
    try:
        await schedule_memory_persistence(
            deps.redis, session_id, user_id, messages,
            limits=deps.limits, queue_name=deps.settings.queue_name,
        )
    except InvalidHandover:
        # The list broke a limit (say, too many messages); logged without content.
        outcome = "refused"
        log.warning("chat: memory hand-over refused")
    except HandoverUnavailable:
        outcome = "unavailable"
        log.warning("chat: memory hand-over skipped; the next turn hands the list over again")
    response.headers[HANDOVER_HEADER] = f"{(time.perf_counter() - started) * 1000:.3f}"
    return ChatReply(session_id=session_id, answer=answer, handover=outcome,
                     known_facts=len(facts))
