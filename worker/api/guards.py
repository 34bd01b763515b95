"""ASGI middleware at the API's door: size limits and an access log without personal data.

- A body over ``max_body_bytes`` or a query string over ``max_query_bytes``
  gets 413 with a fixed body, before the app sees it: nothing of it is
  echoed, logged or kept beyond the limit (a chunked body is counted as it
  arrives; the rest is read and dropped, up to DRAIN_CAP_BYTES).
- The access log names the route's template (``/users/{user_id}/search``),
  never the path's ids nor the query, with the status and the milliseconds.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

log = logging.getLogger("memfleet.api.access")

Scope = dict[str, Any]
Receive = Any
Send = Any
App = Any

_TOO_LARGE = json.dumps({"detail": "the request is too large"}).encode()
# On the hand-over route the door's 413 names the kind its other 413 names
# (worker.api.handover_routes), so a client in any language reads one answer.
_HANDOVER_PATH = re.compile(r"^/users/[^/]+/sessions/[^/]+/handover$")
_HANDOVER_TOO_LARGE = json.dumps({"detail": "the request is too large",
                                  "error": "HandoverTooLarge"}).encode()


# An over-limit body is read and dropped up to this much before the 413, so that
# an ordinary client that is still sending reads the answer instead of a reset;
# beyond it the connection is closed at once.
DRAIN_CAP_BYTES = 16 * 1_048_576


async def _drain(receive: Receive, already: int) -> None:
    size = already
    while size <= DRAIN_CAP_BYTES:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        size += len(message.get("body", b""))


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the app ``body`` (already read whole) once, then the
    connection's own messages (a disconnect)."""
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(scope: Scope, send: Send) -> None:
    body = _HANDOVER_TOO_LARGE if _HANDOVER_PATH.match(scope.get("path", "")) else _TOO_LARGE
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class SizeLimits:
    def __init__(self, app: App, *, max_body_bytes: int, max_query_bytes: int) -> None:
        self.app, self.max_body, self.max_query = app, max_body_bytes, max_query_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if len(scope.get("query_string", b"")) > self.max_query:
            await _refuse(scope, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            if declared.isdigit() and int(declared) <= DRAIN_CAP_BYTES:
                await _drain(receive, 0)
            await _refuse(scope, send)
            return
        # Read the body up to the limit before the app starts: a chunked body that
        # runs over is refused whole, and the app only ever sees a body within it.
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: let the app see it
            size += len(message.get("body", b""))
            if size > self.max_body:
                if message.get("more_body", False):
                    await _drain(receive, size)
                await _refuse(scope, send)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        await self.app(scope, replaying(b"".join(chunks), receive), send)


class AccessLog:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def watched(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "(no route)"
            log.info("%s %s %d %.1f ms", scope["method"], template, status,
                     (time.perf_counter() - started) * 1000)


class NoStore:
    """``Cache-Control: no-store`` on every answer but the panel's own files (which set
    their own caching, worker.api.panel_page): the answers carry a user's memory and
    conversation, which no browser or proxy should keep."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "").startswith("/panel"):
            await self.app(scope, receive, send)
            return

        async def no_store(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(name, value) for name, value in message.get("headers", [])
                           if name.lower() != b"cache-control"]
                message = {**message, "headers": [*headers, (b"cache-control", b"no-store")]}
            await send(message)

        await self.app(scope, receive, no_store)
