"""The hand-over's hot path: a well-formed hand-over with a valid key, answered without
FastAPI's routing, dependency solving and body validation.

On 2 cores the hand-over over HTTP is CPU-bound at 16 in flight, and most of an API
process's CPU per hand-over went to FastAPI's machinery around the call, not to the
call (docs/bench.md, "The hand-over over HTTP"). This ASGI middleware answers the one
case that is nearly every request, ``POST /users/{u}/sessions/{s}/handover`` with a
JSON body of exactly HandoverBody's shape and a service key with the ``handover``
scope, by calling the same hand-over (worker.api.handover_routes.hand_over_now). Every
other request, and every one it has the least doubt about (a header it would parse
differently, an id or field FastAPI would refuse, a key that does not verify), goes
to the app untouched, body and all: 401, 403 and 422 stay FastAPI's, word for word.
The route stays declared in handover_routes, so the OpenAPI document is unchanged.

It sits inside worker.api.guards.SizeLimits (the body is within the limit) and sets
``scope["route"]`` to the declared route, so the access log names its template.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.routing import APIRoute
from starlette.responses import Response

from worker.api.auth import InvalidToken
from worker.api.fields import MAX_ID_CHARS
from worker.api.guards import replaying
from worker.api.handover_routes import hand_over_now, router
from worker.api.service_auth import ServiceKeyCheck
from worker.errors import StoreError
from worker.memory_rules import id_fault
from worker.store.service_keys import parse_key

Scope = dict[str, Any]
App = Any

# Starlette's own pattern for the route's two path parameters.
_PATH = re.compile(r"^/users/([^/]+)/sessions/([^/]+)/handover$")
_FIELDS = frozenset({"messages", "agent_id", "listed_at_us"})
_MAX_INT64 = 2**63 - 1  # listed_at_us beyond it: let pydantic and the hand-over say


def _headers(scope: Scope) -> tuple[bytes | None, bytes | None]:
    """The first Authorization and Content-Type values, as Starlette reads them."""
    auth = content_type = None
    for name, value in scope["headers"]:
        if name == b"authorization" and auth is None:
            auth = value
        elif name == b"content-type" and content_type is None:
            content_type = value
    return auth, content_type


def _is_json(content_type: bytes | None) -> bool:
    # FastAPI reads a body as JSON for application/json (and +json); without a
    # Content-Type it does not: those go to the app.
    return content_type is not None and \
        content_type.split(b";", 1)[0].strip().lower() == b"application/json"


def _valid_id(value: str) -> bool:
    return 1 <= len(value) <= MAX_ID_CHARS and id_fault(value, MAX_ID_CHARS) is None


def _fields(body: bytes) -> tuple[list[Any], str | None, int | None] | None:
    """(messages, agent_id, listed_at_us) of a body HandoverBody takes as it is; None
    for anything else (pydantic then says what is wrong, or coerces)."""
    try:
        data = json.loads(body)
    except Exception:  # noqa: BLE001 - FastAPI answers each the way it does (422, 400)
        return None
    if type(data) is not dict or not data.keys() <= _FIELDS:
        return None
    messages, agent_id = data.get("messages"), data.get("agent_id")
    listed = data.get("listed_at_us")
    if type(messages) is not list or (agent_id is not None and type(agent_id) is not str):
        return None
    if listed is not None and (type(listed) is not int or not 0 <= listed <= _MAX_INT64):
        return None
    return messages, agent_id, listed


class HandoverFastPath:
    def __init__(self, app: App) -> None:
        self.app = app
        # What the access log names (worker.api.guards.AccessLog reads its template).
        self._route = next(route for route in router.routes
                           if isinstance(route, APIRoute) and route.name == "hand_over")

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        match = _PATH.match(scope["path"])
        if match is None:
            await self.app(scope, receive, send)
            return
        auth, content_type = _headers(scope)
        user_id, session_id = match[1], match[2]
        key = auth[7:].decode("latin-1") if auth is not None and auth[:7] == b"Bearer " \
            else ""
        if not (_is_json(content_type) and parse_key(key) is not None
                and _valid_id(user_id) and _valid_id(session_id)):
            await self.app(scope, receive, send)
            return
        body, replay = await _read_body(receive)
        fields = _fields(body)
        app_state = scope["app"].state
        if fields is None or not await _may_hand_over(app_state.service_keys, key):
            await self.app(scope, replay, send)
            return
        scope["route"] = self._route
        messages, agent_id, listed_at_us = fields
        response: Response = await hand_over_now(
            app_state.deps, session_id, user_id, messages, agent_id=agent_id,
            listed_at_us=listed_at_us)
        await response(scope, receive, send)


async def _may_hand_over(check: ServiceKeyCheck, key: str) -> bool:
    # A key that does not verify, or lacks the scope: the app refuses it (and logs
    # the refusal) exactly as it always has.
    try:
        _, scopes = await check.scopes(key)
    except (InvalidToken, StoreError):
        return False
    return "handover" in scopes


async def _read_body(receive: Any) -> tuple[bytes, Any]:
    """The whole body (SizeLimits has bounded it), and a receive that gives it again."""
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    return body, replaying(body, receive)
