"""The commit events as server-sent events, bounded per process and ended on shutdown.

- **A connection of its own**: each stream reads with a blocking ``XREAD`` on a
  Redis connection only it uses, closed when the stream ends; the shared
  client's pool never waits behind a blocked read.
- **Bounded**: at most MEMFLEET_API_EVENT_STREAMS_PER_KEY streams at once per
  service key (one more: 429) and MEMFLEET_API_EVENT_STREAMS_MAX per API process
  (one more: 503), both with Retry-After (worker.api.long_polls).
- **No gap**: a stream starts after an id (``Last-Event-ID``, ``?after=``, or the
  newest event kept when neither is given) and reads on from the last id sent,
  so a reconnecting client neither misses nor repeats an event.
- **Keep-alive**: ``: keep-alive`` after KEEPALIVE_S without an event, so that
  proxies keep the connection and the client learns it is alive.
- **It ends** when the client goes away, when Redis fails mid-stream (the client
  reconnects with its last id), when the client takes nothing for
  MEMFLEET_API_SEND_TIMEOUT_S, and when the server shuts down: ``close()``
  ends every stream at once (worker.api.serve's protocol calls it when uvicorn
  starts to shut down, through the lifespan state under STATE_KEY; uvicorn
  waits for open responses before it stops, and would wait forever).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.responses import Response

from worker.api.long_polls import LongPollRefused, LongPolls, Slot
from worker.api.service_auth import Caller
from worker.protocol.events import CommitEvent, last_event_id, read_events

log = logging.getLogger("memfleet.api.events")

# The lifespan state's name for the process's EventStreams (worker.api.serve reads it).
STATE_KEY = "memfleet_event_streams"
KEEPALIVE_S = 15.0
BATCH = 100  # events one read takes at most
OPEN_TIMEOUT_S = 1.0  # connect and find the start within this, else 503
# A blocked read answers within its block; past this more the connection is dead.
READ_MARGIN_S = 5.0
# Ahead of our protocol's own abort on a client that reads nothing (worker.api.exports).
SEND_TIMEOUT_GRACE_S = 1.0
KEEPALIVE = b": keep-alive\n\n"


def frame(event: CommitEvent) -> bytes:
    """One event as SSE: its stream id, the type ``commit``, the data (docs/api.md)."""
    data = json.dumps({"session": event.session, "handover": event.handover,
                       "older_lists": event.older_lists, "outcome": event.outcome,
                       "added": event.added, "updated": event.updated,
                       "deleted": event.deleted, "at": event.at_ms})
    return f"id: {event.id}\nevent: commit\ndata: {data}\n\n".encode()


class EventStreams:
    """One per API process: admits streams, opens their connections, ends them."""

    def __init__(self, redis_url: str, events_key: str, *, slots: LongPolls,
                 send_timeout_s: float, keepalive_s: float = KEEPALIVE_S) -> None:
        self._url, self.events_key, self.slots = redis_url, events_key, slots
        self.send_timeout_s = send_timeout_s + SEND_TIMEOUT_GRACE_S
        self.keepalive_s = keepalive_s
        self.closing = asyncio.Event()

    def close(self) -> None:
        """End every stream now and admit no more (the server is shutting down)."""
        self.closing.set()

    async def open(self, after: str | None, who: Caller) -> EventStream:
        """A stream after ``after`` (None: after the newest event kept) for ``who``;
        LongPollRefused when the caller or the process has its fill of streams (503 too
        when the server is closing); RedisError, OSError or TimeoutError when Redis does
        not answer within OPEN_TIMEOUT_S."""
        if self.closing.is_set():
            raise LongPollRefused(503, "the server is shutting down; retry later")
        slot = self.slots.admit(who)
        conn = Redis.from_url(self._url, single_connection_client=True,
                              socket_connect_timeout=OPEN_TIMEOUT_S,
                              socket_timeout=self.keepalive_s + READ_MARGIN_S)
        try:
            async with asyncio.timeout(OPEN_TIMEOUT_S):  # Redis away: 503 at once
                if after is None:
                    # Resolved now, not "$" on every read: an event between reads is kept.
                    after = await last_event_id(conn, self.events_key)
                else:
                    await conn.ping()
        except BaseException:
            await self.release(conn, slot)
            raise
        return EventStream(self, conn, after, slot)

    async def release(self, conn: Redis, slot: Slot) -> None:
        slot.release()
        with contextlib.suppress(RedisError, OSError):
            await conn.aclose()


async def _until_disconnect(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class EventStream(Response):
    """The events after ``after``, until the client, Redis or the server ends it; the
    connection and the process's slot are given back however it ends."""

    media_type = "text/event-stream"

    def __init__(self, streams: EventStreams, conn: Redis, after: str, slot: Slot) -> None:
        # As StreamingResponse does: no body, so no Content-Length (a chunked answer).
        self.status_code, self.background = 200, None
        # no-store: never replayed from a cache; X-Accel-Buffering: nginx passes it on.
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self._streams, self._conn, self._after, self._slot = streams, conn, after, slot

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        streams = self._streams
        gone = asyncio.ensure_future(_until_disconnect(receive))
        closing = asyncio.ensure_future(streams.closing.wait())
        try:
            await self._send(send, {"type": "http.response.start", "status": self.status_code,
                                    "headers": self.raw_headers})
            if await self._pump(send, gone, closing):
                await self._send(send, {"type": "http.response.body", "body": b"",
                                        "more_body": False})
        except TimeoutError:
            # Returning without the end: the server closes the connection.
            log.info("events: the client took nothing for %g s; cut", streams.send_timeout_s)
        finally:
            gone.cancel()
            closing.cancel()
            await streams.release(self._conn, self._slot)

    async def _pump(self, send: Any, gone: asyncio.Future[Any],
                    closing: asyncio.Future[Any]) -> bool:
        """Send events until the end; True when the client is still there to be told."""
        after, block_ms = self._after, int(self._streams.keepalive_s * 1000)
        while True:
            read: asyncio.Future[Any] = asyncio.ensure_future(read_events(
                self._conn, self._streams.events_key, after=after, count=BATCH,
                block_ms=block_ms))
            await asyncio.wait({read, gone, closing}, return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                read.cancel()  # redis-py drops the connection under a cancelled read
                with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
                    await read
                return not gone.done()
            try:
                batch = read.result()
            except (RedisError, OSError) as exc:
                log.warning("events: Redis failed mid-stream: %s", type(exc).__name__)
                return not gone.done()
            body = b"".join(frame(event) for event in batch) or KEEPALIVE
            await self._send(send, {"type": "http.response.body", "body": body,
                                    "more_body": True})
            if batch:
                after = batch[-1].id

    async def _send(self, send: Any, message: dict[str, Any]) -> None:
        async with asyncio.timeout(self._streams.send_timeout_s):
            await send(message)
