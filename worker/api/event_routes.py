"""``GET /events``: the commit events over HTTP, as server-sent events.

For a chat server in any language that wants to know when memory changed
without polling: the events worker.client's ``memory_events`` reads
(worker.protocol.events; no id, no text), each as ``id: <stream id>``,
``event: commit`` and ``data: {...}`` (worker.api.event_stream). A service key
with the ``handover`` or ``read`` scope only: the events name every user's
sessions (by stand-in), so no end user's token reads them.

Where it starts: after the ``Last-Event-ID`` header (what a reconnecting
EventSource sends), else after ``?after=`` (``0``: from the oldest event kept),
else with the events that come after the request.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response
from redis.exceptions import RedisError

from worker.api.deps import ApiDeps
from worker.api.errors import AUTH_RESPONSES, RETRY_AFTER_HEADER, ErrorBody, handover_unavailable
from worker.api.long_polls import LongPollRefused
from worker.api.service_auth import Caller, EventReader

log = logging.getLogger("memfleet.api.events")

router = APIRouter(tags=["handover"])

# A Redis stream id: milliseconds, optionally a sequence ("0": before the oldest).
STREAM_ID = r"^[0-9]{1,20}(-[0-9]{1,20})?$"
_ID_CHARS = 41

_SSE_EXAMPLE = ('id: 1767225600000-0\nevent: commit\ndata: {"session": "3f2a9c0d1e4b5a69", '
                '"handover": 2, "older_lists": 0, "outcome": "committed", "added": 1, '
                '"updated": 0, "deleted": 0, "at": 1767225600000}\n\n: keep-alive\n\n')

_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES,
    200: {"content": {"text/event-stream": {"schema": {"type": "string"},
                                            "example": _SSE_EXAMPLE}},
          "description": "The commit events as they come (server-sent events), with a "
                         "`: keep-alive` comment after 15 s without one."},
    429: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
          "description": "This service key has its share of this API process's streams "
                         "open (MEMFLEET_API_EVENT_STREAMS_PER_KEY; `error`: "
                         "TooManyLongPolls); retry after Retry-After."},
    503: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
          "description": "Redis did not answer within 1 s (`error`: HandoverUnavailable), "
                         "or this API process has its fill of open streams "
                         "(MEMFLEET_API_EVENT_STREAMS_MAX; `error`: LongPollsFull); retry "
                         "after Retry-After."},
}


@router.get("/events", response_class=Response, responses=_RESPONSES,
            summary="Commit events as server-sent events (a service key with the handover "
                    "or read scope)")
async def commit_events(
    request: Request,
    key_id: EventReader,
    after: Annotated[str | None, Query(
        pattern=STREAM_ID, max_length=_ID_CHARS,
        description="Start after this stream id (`0`: from the oldest event kept); the "
                    "Last-Event-ID header wins over it.")] = None,
    last_event_id: Annotated[str | None, Header(
        pattern=STREAM_ID, max_length=_ID_CHARS,
        description="The id of the last event the client has: it gets those after it.",
    )] = None,
) -> Response:
    deps: ApiDeps = request.app.state.deps
    try:
        return await deps.streams.open(last_event_id if last_event_id is not None else after,
                                       Caller(key_id=key_id))
    except LongPollRefused as refused:
        return refused.response()
    except (RedisError, OSError, TimeoutError) as exc:
        log.warning("events: Redis unavailable: %s", type(exc).__name__)
        return handover_unavailable()

