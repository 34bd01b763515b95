"""The hand-over over HTTP: a chat server in any language hands a session's turns over.

``POST /users/{user_id}/sessions/{session_id}/handover`` with a service key holding
the ``handover`` scope (worker.api.service_auth; an end user's token is 403) calls
the Python hand-over itself, ``schedule_memory_persistence``, on the API's Redis:
the same validation, windowing and limits, the same hand-over id. Its refusals:
InvalidHandover 400 with the reason (it names positions and limits, never text),
HandoverTooLarge 413, a full session or user budget (HandoverBacklogFull,
SessionBytesFull, UserSessionsFull) 429 with Retry-After (worker.api.errors; a
budget frees itself as workers finish, as with the chat stand-in's turns), and
HandoverUnavailable 503 within the hand-over's own bound (HANDOVER_TIMEOUT_S).
Each refusal's body names its kind, the Python exception's name, in ``error``
beside ``detail`` (a body over MEMFLEET_API_MAX_BODY_BYTES too, refused at the
door by worker.api.guards). No message text is logged.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, status
from fastapi.responses import Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from worker.api.deps import ApiDeps
from worker.api.errors import (
    AUTH_RESPONSES,
    ErrorBody,
    error_responses,
    handover_refused,
    handover_unavailable,
    refusal,
)
from worker.api.fields import MAX_ID_CHARS, valid_id
from worker.api.service_auth import HandoverUser
from worker.client.handover import schedule_memory_persistence
from worker.errors import (
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    InvalidHandover,
    UserSessionsFull,
)

log = logging.getLogger("memfleet.api.handover")

# Seconds the hand-over may wait on Redis before it is a 503: the client's own default.
HANDOVER_TIMEOUT_S = 1.0

router = APIRouter(prefix="/users/{user_id}", tags=["handover"])

SessionId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(valid_id)
]


class HandoverBody(BaseModel):
    """What ``schedule_memory_persistence`` takes besides the ids, as JSON."""

    model_config = ConfigDict(extra="forbid")

    # Checked by the hand-over itself (worker.protocol.payload.parse_messages), so that
    # HTTP and Python refuse the same lists with the same reasons.
    messages: list[Any] = Field(
        description="The session's messages, oldest first: [{\"role\": \"user\"|\"assistant\""
                    "|\"system\", \"content\": \"...\"}, ...]. A session over the limits is "
                    "handed over as its most recent window that fits.")
    agent_id: str | None = Field(
        default=None, description="The persona or agent instance of the session.")
    listed_at_us: int | None = Field(
        default=None, ge=0,
        description="When the chat server read the list, on the Redis clock (microseconds): "
                    "a list read before an erase of the user stores nothing.")


class HandoverAccepted(BaseModel):
    handover_id: int = Field(description="The hand-over's number (0: none stored); a commit "
                                         "covering it makes its facts readable.")


@router.post(
    "/sessions/{session_id}/handover",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=HandoverAccepted,
    responses={
        **AUTH_RESPONSES,
        **error_responses(429, 503),
        400: {"model": ErrorBody,
              "description": "The hand-over is invalid (ids, roles, empty or over-long "
                             "messages); the reason names the position, never the text."},
    },
    summary="Hand a session's messages over to memory (a service key with the handover scope)",
)
async def hand_over(
    request: Request, session_id: SessionId, user_id: HandoverUser, body: HandoverBody,
) -> Response:
    # A well-formed hand-over rarely gets here: worker.api.handover_fast answers it.
    return await hand_over_now(request.app.state.deps, session_id, user_id, body.messages,
                               agent_id=body.agent_id, listed_at_us=body.listed_at_us)


async def hand_over_now(
    deps: ApiDeps, session_id: str, user_id: str, messages: list[Any], *,
    agent_id: str | None, listed_at_us: int | None,
) -> Response:
    """The hand-over of checked ids and body fields, answered: 202 with its id, or the
    refusal (the same bodies and log lines as worker.api.errors' handlers)."""
    id_key = deps.settings.telemetry_id_key
    try:
        enqueued = await schedule_memory_persistence(
            deps.handover, session_id, user_id, messages,
            limits=deps.limits, queue_name=deps.settings.queue_name,
            timeout_s=HANDOVER_TIMEOUT_S,
            telemetry_id_key=id_key.get_secret_value() if id_key else None,
            agent_id=agent_id, listed_at_us=listed_at_us,
        )
    except (HandoverBacklogFull, UserSessionsFull, HandoverTooLarge) as exc:
        return handover_refused(exc)  # 429 with Retry-After, 413
    except HandoverUnavailable as exc:
        log.warning("handover: Redis unavailable: %s", type(exc.__cause__).__name__)
        return handover_unavailable()
    except InvalidHandover as exc:
        # The reason names positions, fields and limits, never the content.
        log.info("handover: 400 invalid hand-over")
        return refusal(400, str(exc), "InvalidHandover")
    # What HandoverAccepted serialises to, without a model on the hot path.
    return Response(b'{"handover_id":%d}' % enqueued.handover_id, status_code=202,
                    media_type="application/json")
