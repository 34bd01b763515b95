"""The chat stand-in: what a chat server's turn looks like with memfleet done right.

1. store the user's message in the session's list,
2. read memory into the prompt, split (worker.read_split: the stable block, then the
   volatile block for this message; both empty while the user's memory is off), and
   answer: with MEMFLEET_CHAT_MODEL_BASE_URL, the model's answer to the persona, the
   stable block, the volatile block and the conversation, the memory tools offered
   and its tool calls run for the token's user (api_stub.chat_model); without it,
   a canned answer after ``MEMFLEET_CHAT_ANSWER_MS`` as a model's answer would take;
   in the session ``session_id`` of the token's user (each user numbers their
   own sessions),
3. hand the whole list over with ``schedule_memory_persistence``, after the
   answer exists and without waiting for any memory work,
4. return the answer. A Redis outage or a list the hand-over refuses as invalid
   never fails the turn.

Mounted only with MEMFLEET_CHAT_STANDIN (api_stub.chat_app): a token of any user feeds
memory whatever that user types here, which a production chat server's own turns
should do, not an open route. Before step 2 the turn is admitted (api_stub.chat_log):
a new session beyond MEMFLEET_CHAT_SESSIONS_PER_USER, or a turn beyond the user's
MEMFLEET_CHAT_TURNS_PER_MINUTE and burst, is 429 with Retry-After and stores
nothing, before any answer (a model's spend) is made.

The byte budgets (worker.memory_rules) are the other exceptions, each answered before or
instead of storing the turn, so a retry does not store it twice: a message over
MEMFLEET_MAX_MESSAGE_BYTES is 413 before anything is done; a hand-over refused
because the session's or the user's budget is full (older lists no worker has
finished yet: SessionBytesFull, HandoverBacklogFull, UserSessionsFull) takes the
turn back and is 429 with Retry-After (worker.api.errors): the user is sending
faster than memory is processed.

X-Memory-Handover-Ms says how long step 3 took, the latency memory adds to a turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Request, Response, status
from fastapi.responses import JSONResponse
from pydantic import AfterValidator
from redis.exceptions import RedisError

from api_stub.chat_log import ChatLog
from api_stub.chat_model import ChatModel, ModelUnavailable, in_process_tools, prompt_messages
from api_stub.chat_models import ChatBody, ChatReply, HandoverOutcome
from worker.api.auth import TokenSubject
from worker.api.deps import ApiDeps
from worker.api.errors import AUTH_RESPONSES, ErrorBody, error_responses, refusal
from worker.api.fields import MAX_ID_CHARS, valid_id
from worker.client.handover import schedule_memory_persistence
from worker.errors import (
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    InvalidHandover,
    StoreError,
    UserSessionsFull,
)
from worker.read_split import PromptBlocks, SplitPolicy, StableBlock, VolatileBlock, prompt_blocks

log = logging.getLogger("memfleet.api.chat")

HANDOVER_HEADER = "X-Memory-Handover-Ms"
CANNED_ANSWER = "Thanks, noted. (memfleet's chat stand-in answers every turn the same way.)"

router = APIRouter(tags=["chat"])

SessionId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(valid_id)
]


@router.post(
    "/chat/{session_id}",
    response_model=ChatReply,
    responses={
        **AUTH_RESPONSES,
        **error_responses(400, 503),
        429: {"model": ErrorBody, "headers": {"Retry-After": {
            "description": "Seconds until the turn may be sent again.",
            "schema": {"type": "string"},
        }}, "description": "Nothing was kept: a new session beyond the user's cap "
                           "(ChatSessionsFull), a turn beyond the user's rate "
                           "(ChatTurnsTooFast), or a full memory budget in Redis "
                           "(HandoverBacklogFull, SessionBytesFull, UserSessionsFull)."},
        200: {"headers": {HANDOVER_HEADER: {
            "description": "Milliseconds the memory hand-over added to this turn.",
            "schema": {"type": "string"},
        }}},
    },
    summary="One chat turn in a session of the token's user (stores, answers, hands over)",
)
async def chat_turn(
    request: Request,
    response: Response,
    session_id: SessionId,
    body: ChatBody,
    user_id: TokenSubject,
) -> ChatReply | JSONResponse:
    deps: ApiDeps = request.app.state.deps
    chat: ChatLog = request.app.state.chat_log  # api_stub.chat_app's start
    size = len(body.content.encode("utf-8"))  # CleanText: valid UTF-8
    if size > deps.limits.max_message_bytes:
        raise HandoverTooLarge("the message", size, deps.limits.max_message_bytes)
    refused = await chat.admit_turn(user_id, session_id)  # Redis away: 503
    if refused is not None:
        log.info("chat: turn refused: %s", refused.error)
        return refusal(429, refused.detail, refused.error,
                       retry_after_s=refused.retry_after_s)
    policy: SplitPolicy = request.app.state.split_policy
    try:
        blocks = await prompt_blocks(deps.memory, deps.providers.embedder, user_id,
                                     query=body.content, agent_id=body.agent_id,
                                     policy=policy, embedders=deps.providers.embedder_for,
                                     memory_default=deps.settings.memory_default)
    except StoreError:
        # Memory is an extra: the turn goes on without it.
        log.warning("chat: memory read failed; answering without it")
        blocks = NO_BLOCKS
    model: ChatModel | None = request.app.state.chat_model  # api_stub.chat_app's start
    tool_calls = 0
    if model is None:
        if deps.settings.chat_answer_ms:
            await asyncio.sleep(deps.settings.chat_answer_ms / 1000)
        answer = CANNED_ANSWER
    else:
        answer, tool_calls = await _model_answer(request, model, chat, blocks, user_id,
                                                 session_id, body)
    try:
        # Kept no longer than a hand-over sends: the log is bounded in bytes too.
        messages, listed_at_us = await chat.append_turn_listed(
            user_id, session_id, body.content, answer,
            max_bytes=deps.limits.max_handover_bytes)
    except RedisError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            detail="the conversation store is unavailable") from exc

    id_key = deps.settings.telemetry_id_key  # the workers' key: the spans' stand-ins match
    started = time.perf_counter()
    outcome: HandoverOutcome = "scheduled"
    try:
        await schedule_memory_persistence(
            deps.redis, session_id, user_id, messages,
            limits=deps.limits, queue_name=deps.settings.queue_name,
            telemetry_id_key=id_key.get_secret_value() if id_key else None,
            agent_id=body.agent_id, listed_at_us=listed_at_us,
        )
    except (HandoverBacklogFull, UserSessionsFull):
        # A full budget: the turn is refused whole (worker.api.errors answers 429).
        await chat.take_back_turn(user_id, session_id, body.content, answer)
        raise
    except InvalidHandover:
        # The list broke a limit: not this turn's message (checked above), so an older
        # one (say, kept from before a lower limit); the turn goes on. No content logged.
        outcome = "refused"
        log.warning("chat: memory hand-over refused")
    except HandoverUnavailable:
        outcome = "unavailable"
        log.warning("chat: memory hand-over skipped; the next turn hands the list over again")
    response.headers[HANDOVER_HEADER] = f"{(time.perf_counter() - started) * 1000:.3f}"
    return ChatReply(session_id=session_id, answer=answer, handover=outcome,
                     known_facts=blocks.stable.count + blocks.volatile.count,
                     tool_calls=tool_calls)


NO_BLOCKS = PromptBlocks(StableBlock("", "", ()), VolatileBlock("", ()))


async def _model_answer(request: Request, model: ChatModel, chat: ChatLog,
                        blocks: PromptBlocks, user_id: str, session_id: str,
                        body: ChatBody) -> tuple[str, int]:
    """The model's answer and the tool calls it ran; 503 if the model did not answer."""
    try:
        history = await chat.history(user_id, session_id)
    except RedisError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            detail="the conversation store is unavailable") from exc
    messages = prompt_messages(blocks, history, body.content)
    # The user's own token (TokenSubject verified it): the tools act as the user would.
    token = request.headers["authorization"].split(" ", 1)[1].strip()
    tools = in_process_tools(request.app, token, user_id, body.agent_id)
    try:
        turn = await model.answer(messages, tools)
    except ModelUnavailable as exc:
        log.warning("chat: the chat model did not answer (%s)", exc)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            detail="the chat model is unavailable") from None
    finally:
        await tools.api.aclose()
    return turn.answer, turn.tool_calls
