"""`memfleet mcp --http`: the MCP server over streamable HTTP (docs/mcp.md).

Each request carries its credential, as the memory API takes it: an end user's token
(``Authorization: Bearer <JWT>``, acting for its ``sub``) or a service key
(``Bearer mfk_...``) with the user in ``X-Memfleet-User``; ``X-Memfleet-Agent``
optionally names the agent. The server holds no secret and judges no credential
itself: it reads the token's ``sub`` (unverified) to know which user's paths to call,
and asks the memory API. At open (a request without ``Mcp-Session-Id``) the credential
must pass one cheap read for its user, ``GET /users/{u}/consent`` (the ``read`` scope
or the user's own token; the executor reads it before every tool but forget anyway):
a forged, expired or revoked credential is answered the API's 401, a wrong scope or
another user's 403, before the session manager is reached, so it takes no session
slot. A check that passed is remembered for CHECK_TTL_S per credential and user (a
hash of both), so a client that opens sessions in a row costs one API call. After
open, the credential rides on every call and the API checks it each time (signature,
expiry, revocation, scopes, consent, rate limits).

One session, one principal: the SDK's session manager binds a session to the principal
of the request that opened it (``scope["user"]``: the user, the agent and, for a
service key, the key's fingerprint) and answers 404 to a request of another principal
for it. A user's token may be renewed within a session (same ``sub``); another user's
token, or a service key naming another user, never reaches that session.

Bounds: the request headers (MAX_HEADER_BYTES, 431), the request body (MAX_BODY_BYTES,
413), open sessions (MAX_SESSIONS, 503), idle sessions closed after SESSION_IDLE_S;
rates are the memory API's (per user and per key), which every tool call goes through.
Logs name no user, credential or text.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections import OrderedDict
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
from worker.errors import AccessDenied, MemfleetError, MemoryApiUnavailable, RateLimited
from worker.mcp.server import DEFAULT_CALL_TIMEOUT_S, Principal, build_server
from worker.memory_rules import id_fault

log = logging.getLogger("memfleet.mcp.http")

PATH = "/mcp"
USER_HEADER = "x-memfleet-user"
AGENT_HEADER = "x-memfleet-agent"
MAX_BODY_BYTES = 262_144  # a tool call is small; the memory API caps its own bodies too
# A request's headers, names and values summed: a bearer token and a few more fit many
# times over. Checked on the parsed request, so whichever HTTP parser uvicorn picked.
MAX_HEADER_BYTES = 16_384
MAX_INCOMPLETE_HEAD_BYTES = 65_536  # h11's: a head still unfinished past this is dropped
MAX_SESSIONS = 1_000
SESSION_IDLE_S = 30 * 60.0
SESSION_HEADER = "mcp-session-id"
# How long a credential that passed the check at open is trusted to open more sessions
# for the same user without asking the API again (each call is still checked by it).
CHECK_TTL_S = 60.0
CHECK_CACHE_MAX = 10_000
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

    def __init__(self, status: int, detail: str, retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after_s = retry_after_s


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
    """The ``sub`` of a JWT, unverified (the memory API verifies it at open and on each call)."""
    try:
        claims = jwt.decode(credential, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise Refused(401, "the bearer token is neither a service key nor a JWT") from None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    if not isinstance(subject, str) or not subject:
        raise Refused(401, "the token has no sub (the user it acts for)")
    return subject


def _api_for(api_url: str, credential: str, transport: httpx.AsyncBaseTransport,
             timeout_s: float) -> AsyncMemoryApi:
    """A memory API client carrying ``credential`` (a service key or a user's token)."""
    if looks_like_key(credential):
        return AsyncMemoryApi(api_url, service_key=credential, timeout_s=timeout_s,
                              transport=transport)
    return AsyncMemoryApi(api_url, token=credential, timeout_s=timeout_s, transport=transport)


class CredentialCheck:
    """At a session's open: does the memory API take this credential for this user?
    One ``GET /users/{u}/consent`` (cheap, and a credential the tools can use at all
    must pass it); a pass is remembered CHECK_TTL_S under a hash of the credential and
    the user, a refusal never (a fixed credential is taken at once)."""

    def __init__(self, api_url: str, transport: httpx.AsyncBaseTransport,
                 timeout_s: float, *, ttl_s: float = CHECK_TTL_S,
                 most: int = CHECK_CACHE_MAX) -> None:
        self.api_url = api_url
        self.transport = transport
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self.most = most
        self._passed: OrderedDict[str, float] = OrderedDict()

    @staticmethod
    def _fingerprint(credential: str, user: str) -> str:
        return hashlib.sha256(json.dumps([credential, user]).encode()).hexdigest()

    async def __call__(self, credential: str, user: str) -> None:
        """Returns when the API takes ``credential`` for ``user``; Refused otherwise."""
        fingerprint = self._fingerprint(credential, user)
        now = time.monotonic()
        until = self._passed.get(fingerprint)
        if until is not None and until > now:
            return
        self._passed.pop(fingerprint, None)
        api = _api_for(self.api_url, credential, self.transport, self.timeout_s)
        try:
            async with asyncio.timeout(self.timeout_s):
                await api.consent(user)
        except AccessDenied as denied:
            if denied.status == 403:
                raise Refused(403, "the memory API refuses this credential for this user "
                                   "(a service key needs the read scope; a token reaches "
                                   "its own user only)") from None
            raise Refused(401, "the memory API refused the credential (invalid, expired "
                               "or revoked)") from None
        except RateLimited as limited:
            raise Refused(429, "the memory API's rate limit: try again later",
                          limited.retry_after_s) from None
        except (MemoryApiUnavailable, TimeoutError):
            raise Refused(503, "the memory API could not check the credential now",
                          5.0) from None
        except MemfleetError:
            raise Refused(502, "the memory API's answer to the credential check was not "
                               "understood") from None
        # (never api.aclose(): it would close the transport every principal shares)
        self._passed[fingerprint] = time.monotonic() + self.ttl_s
        while len(self._passed) > self.most:
            self._passed.popitem(last=False)


class Guard:
    """In front of the SDK's session manager: who the request acts for, into
    ``scope["user"]``; a request that says nobody answered 401 here, and a request
    that would open a session (no Mcp-Session-Id) only with a credential the memory
    API takes for that user (CredentialCheck), so a refused one holds no slot."""

    def __init__(self, manager: StreamableHTTPSessionManager,
                 check: CredentialCheck | None = None) -> None:
        self.manager = manager
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        try:
            if sum(len(k) + len(v) for k, v in scope.get("headers", ())) > MAX_HEADER_BYTES:
                raise Refused(431, f"the request's headers are over {MAX_HEADER_BYTES} bytes")
            user, token = principal_claims(headers)
            if self.check is not None and SESSION_HEADER not in headers:
                await self.check(token.token, user)
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
    if refused.retry_after_s is not None:
        headers.append((b"retry-after", str(max(1, round(refused.retry_after_s))).encode()))
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def create_app(api_url: str, *, host: str = "127.0.0.1", port: int = 8090,
               call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
               max_sessions: int = MAX_SESSIONS) -> Starlette:
    """The ASGI app: the MCP endpoint at /mcp, acting through the memory API at
    ``api_url`` with each request's own credential."""
    # One connection pool for every principal's client (a client is per call: it holds
    # that call's credential and nothing else).
    transport = httpx.AsyncHTTPTransport()
    server: Server[Any, Any] = build_server(lambda: _principal(server, api_url, transport,
                                                               call_timeout_s),
                                            call_timeout_s=call_timeout_s)
    manager = StreamableHTTPSessionManager(
        server, max_request_body_size=MAX_BODY_BYTES, max_sessions=max_sessions,
        session_idle_timeout=SESSION_IDLE_S, security_settings=_security(host, port))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            try:
                yield
            finally:
                await transport.aclose()

    check = CredentialCheck(api_url, transport, call_timeout_s)
    return Starlette(routes=[Route(PATH, endpoint=Guard(manager, check),
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
    agent = (token.claims or {}).get("memfleet_agent")
    api = _api_for(api_url, token.token, transport, timeout_s)
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
    # h11 by name: with httptools installed (the api extra brings it) uvicorn would
    # pick it, and h11 refuses (400, closed) a head still unfinished past 64 KiB; a head
    # that ends within that but over MAX_HEADER_BYTES is the Guard's 431 (h11's bound
    # is above the Guard's, so which of the two answers never hangs on how the bytes
    # arrived).
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), access_log=False,
                http="h11", h11_max_incomplete_event_size=MAX_INCOMPLETE_HEAD_BYTES)
    return 0
