"""`memfleet mcp --http`: the MCP server over streamable HTTP (docs/mcp.md).

Each request carries its credential, as the memory API takes it: an end user's token
(``Authorization: Bearer <JWT>``, acting for its ``sub``) or a service key
(``Bearer mfk_...``) with the user in ``X-Memfleet-User``; ``X-Memfleet-Agent``
optionally names the agent. The server does not judge the credential: it passes it
through to the memory API on every call, so the API's signature check, scopes,
consent and rate limits apply. It reads the token's ``sub`` (unverified) only to know
which user's paths to call; a forged ``sub`` gets the API's 401.

One session, one principal: the SDK's session manager binds a session to the principal
of the request that opened it (``scope["user"]``: the user, the agent and, for a
service key, the key's fingerprint) and answers 404 to a request of another principal
for it. A user's token may be renewed within a session (same ``sub``); another user's
token, or a service key naming another user, never reaches that session.

Bounds: the request body (MAX_BODY_BYTES, 413), open sessions (MAX_SESSIONS, 503),
idle sessions closed after SESSION_IDLE_S; rates are the memory API's (per user and
per key), which every tool call goes through. Logs name no user, credential or text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from worker.client.memory_api_async import AsyncMemoryApi
from worker.mcp.server import DEFAULT_CALL_TIMEOUT_S, Principal, build_server
from worker.memory_rules import id_fault

log = logging.getLogger("memfleet.mcp.http")

PATH = "/mcp"
USER_HEADER = "x-memfleet-user"
AGENT_HEADER = "x-memfleet-agent"
MAX_BODY_BYTES = 262_144  # a tool call is small; the memory API caps its own bodies too
MAX_SESSIONS = 1_000
SESSION_IDLE_S = 30 * 60.0
MAX_ID_CHARS = 255  # the memory API's (worker.api.fields.MAX_ID_CHARS)
MAX_CREDENTIAL_CHARS = 8_192
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
# A service key's prefix (worker.store.service_keys.PREFIX; that module needs asyncpg).
SERVICE_KEY_PREFIX = "mfk_"


def looks_like_key(credential: str) -> bool:
    """A bearer credential meant as a service key (never read as a JWT)."""
    return credential.startswith(SERVICE_KEY_PREFIX)


class Refused(Exception):
    """A request the server answers itself: its status and fixed words."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def principal_claims(headers: Headers) -> tuple[str, AccessToken]:
    """The user a request acts for and the SDK's token that names its principal;
    Refused (401, 400, 403) when the request does not say one. Never quotes a header."""
    value = headers.get("authorization", "")
    scheme, _, credential = value.partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        raise Refused(401, "an Authorization: Bearer header is needed: a user's token, or a "
                           "service key with X-Memfleet-User")
    if len(credential) > MAX_CREDENTIAL_CHARS:
        raise Refused(401, "the credential is too long")
    agent = headers.get(AGENT_HEADER) or None
    named = headers.get(USER_HEADER) or None
    if looks_like_key(credential):
        if named is None:
            raise Refused(401, "a service key acts for the user named in X-Memfleet-User")
        user = named
        fingerprint = hashlib.sha256(credential.encode()).hexdigest()[:32]
        kind = "service-key"
    else:
        user = _token_subject(credential)
        if named is not None and named != user:
            raise Refused(403, "X-Memfleet-User differs from the token's user")
        fingerprint, kind = "", "user-token"
    for name, given in (("the user id", user), ("X-Memfleet-Agent", agent)):
        fault = None if given is None else id_fault(given, MAX_ID_CHARS)
        if fault is not None:
            raise Refused(400, f"{name} {fault}")
    # client_id and subject are what the session manager compares (one session, one
    # principal); the token itself rides along for the calls to the memory API.
    client_id = json.dumps([kind, fingerprint, agent])
    return user, AccessToken(token=credential, client_id=client_id, subject=user, scopes=[],
                             claims={"memfleet_agent": agent})


def _token_subject(credential: str) -> str:
    """The ``sub`` of a JWT, unverified (the memory API verifies it on every call)."""
    try:
        claims = jwt.decode(credential, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise Refused(401, "the bearer token is neither a service key nor a JWT") from None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    if not isinstance(subject, str) or not subject:
        raise Refused(401, "the token has no sub (the user it acts for)")
    return subject


class Guard:
    """In front of the SDK's session manager: who the request acts for, into
    ``scope["user"]``; a request that says nobody answered 401 here."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            _, token = principal_claims(Headers(scope=scope))
        except Refused as refused:
            log.info("mcp request refused", extra={"status": refused.status})
            await _answer(send, refused)
            return
        scope["user"] = AuthenticatedUser(token)
        scope["auth"] = AuthCredentials([])
        await self.manager.handle_request(scope, receive, send)


async def _answer(send: Send, refused: Refused) -> None:
    body = json.dumps({"error": "Unauthorized" if refused.status == 401 else "Refused",
                       "detail": refused.detail}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if refused.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="memfleet"'))
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_app(api_url: str, *, host: str = "127.0.0.1", port: int = 8090,
               call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> Starlette:
    """The ASGI app: the MCP endpoint at /mcp, acting through the memory API at
    ``api_url`` with each request's own credential."""
    # One connection pool for every principal's client (a client is per call: it holds
    # that call's credential and nothing else).
    transport = httpx.AsyncHTTPTransport()
    server: Server[Any, Any] = build_server(lambda: _principal(server, api_url, transport,
                                                               call_timeout_s),
                                            call_timeout_s=call_timeout_s)
    manager = StreamableHTTPSessionManager(
        server, max_request_body_size=MAX_BODY_BYTES, max_sessions=MAX_SESSIONS,
        session_idle_timeout=SESSION_IDLE_S, security_settings=_security(host, port))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            try:
                yield
            finally:
                await transport.aclose()

    return Starlette(routes=[Route(PATH, endpoint=Guard(manager),
                                   methods=["GET", "POST", "DELETE"])], lifespan=lifespan)


def _principal(server: Server[Any, Any], api_url: str, transport: httpx.AsyncHTTPTransport,
               timeout_s: float) -> Principal:
    """The principal of the request being handled, from the token Guard put on it."""
    request = server.request_context.request
    user = getattr(request, "user", None) if request is not None else None
    if not isinstance(user, AuthenticatedUser):
        raise PermissionError("the request carries no credential")
    token = user.access_token
    if token.subject is None:
        raise PermissionError("the request names no user")
    credential = token.token
    agent = (token.claims or {}).get("memfleet_agent")
    api = (AsyncMemoryApi(api_url, service_key=credential, timeout_s=timeout_s,
                          transport=transport) if looks_like_key(credential)
           else AsyncMemoryApi(api_url, token=credential, timeout_s=timeout_s,
                               transport=transport))
    return Principal(user_id=token.subject, agent_id=agent, api=api)


def _security(host: str, port: int) -> TransportSecuritySettings:
    """DNS rebinding protection when listening on loopback (a browser page must not
    reach a local server through a name it controls); behind a proxy on another
    address the proxy's Host is not known here, so it is off (docs/mcp.md)."""
    if host not in _LOOPBACK:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = [f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=hosts,
                                     allowed_origins=[f"http://{h}" for h in hosts])


def serve_http(api_url: str, host: str, port: int, *, call_timeout_s: float,
               log_level: str) -> int:
    import uvicorn

    app = create_app(api_url, host=host, port=port, call_timeout_s=call_timeout_s)
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), access_log=False,
                h11_max_incomplete_event_size=16_384)
    return 0
