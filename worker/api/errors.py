"""memfleet's errors at the HTTP edge, and the error responses the OpenAPI document declares."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from redis.exceptions import RedisError

from worker.errors import (
    HandoverBacklogFull,
    HandoverTooLarge,
    MemoryOptedOut,
    ProviderError,
    StoreConflict,
    StoreError,
    UserSessionsFull,
)

log = logging.getLogger("memfleet.api")


class ErrorBody(BaseModel):
    detail: str
    # A refusal a client acts on names its kind (the hand-over's: InvalidHandover,
    # HandoverTooLarge, HandoverBacklogFull, SessionBytesFull, UserSessionsFull,
    # HandoverUnavailable), the name of the Python exception; a wait or a stream refused
    # for the caller's or the process's count, TooManyLongPolls or LongPollsFull
    # (worker.api.long_polls); an add asked with if_memory_on while the user's memory
    # is off, MemoryOff: absent on the others.
    error: str | None = None


def refusal(code: int, detail: str, error: str, *,
            retry_after_s: int | None = None) -> JSONResponse:
    """A refusal with its machine-readable kind beside the human reason."""
    headers = None if retry_after_s is None else {"Retry-After": str(retry_after_s)}
    return JSONResponse({"detail": detail, "error": error}, status_code=code, headers=headers)


def handover_unavailable() -> JSONResponse:
    """Redis did not answer the hand-over, a status or a wait in time: 503, retry."""
    return refusal(503, "Redis is unavailable; retry later", "HandoverUnavailable",
                   retry_after_s=1)


_DESCRIPTIONS = {
    400: "The body could not be read (not UTF-8 JSON).",
    401: "No bearer token, or one that does not verify.",
    403: "The token's subject is not the user in the path.",
    404: "No such fact (or session) for this user.",
    409: "The fact is no longer active.",
    413: "The body, the query string or a chat message is over its limit (nothing of it"
         " is echoed).",
    429: "The session's or the user's memory budget in Redis is full of lists no worker"
         " has finished yet; the turn was not kept: send it again after Retry-After.",
    503: "PostgreSQL, Redis or the embeddings provider is unavailable; retry later.",
}


# What the OpenAPI document says of a refusal's Retry-After header.
RETRY_AFTER_HEADER: dict[str, Any] = {"Retry-After": {
    "description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in codes}


# Every route behind a token; 413 too, which worker.api.guards answers before any route.
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    **error_responses(403, 413),
    401: {
        "model": ErrorBody,
        "description": _DESCRIPTIONS[401],
        "headers": {"WWW-Authenticate": {
            "description": "Bearer challenge (RFC 6750).", "schema": {"type": "string"},
        }},
    },
}
# 429: the user's manual writes over their rate (worker.api.write_rate).
WRITE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES,
    429: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
          "description": "Too many manual writes of this user; retry after Retry-After."},
}
# 429: the user's erases and consent changes over their rate (worker.api.write_rate).
ERASE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES,
    429: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
          "description": "Too many erases and consent changes of this user; retry after "
                         "Retry-After."},
}
CONSENT_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES,
    429: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
          "description": "Too many manual writes, or erases and consent changes, of this "
                         "user; retry after Retry-After."},
}


def _unavailable(what: str) -> JSONResponse:
    return JSONResponse({"detail": f"{what} is unavailable; retry later"}, status_code=503,
                        headers={"Retry-After": "1"})


async def _store_error(request: Request, exc: Exception) -> JSONResponse:
    # The exception text names the operation and the driver's error class, never content.
    log.warning("memory API: store error: %s", exc)
    return _unavailable("the memory store")


async def _memory_off(request: Request, exc: Exception) -> JSONResponse:
    # An add asked with if_memory_on (the memory tools) while the user's memory is off.
    return refusal(409, "the user's memory is off: nothing was stored", "MemoryOff")


async def _store_conflict(request: Request, exc: Exception) -> JSONResponse:
    log.warning("memory API: the user's facts kept changing during a write")
    return _unavailable("the memory store")


async def _provider_error(request: Request, exc: Exception) -> JSONResponse:
    log.warning("memory API: embeddings failed: %s", type(exc).__name__)
    return _unavailable("the embeddings provider")


async def _redis_error(request: Request, exc: Exception) -> JSONResponse:
    log.warning("memory API: Redis error: %s", type(exc).__name__)
    return _unavailable("Redis")


# Seconds a refused turn waits: about what a worker takes to finish a session's lists.
HANDOVER_RETRY_AFTER_S = 5


def handover_refused(exc: Exception) -> JSONResponse:
    """A hand-over refused for its size (413) or a full budget (429, Retry-After)."""
    if isinstance(exc, HandoverTooLarge):
        # The message names the limit and the size, never the text.
        log.warning("chat: hand-over too large")
        return refusal(413, str(exc), "HandoverTooLarge")
    log.warning("chat: hand-over refused, budget full: %s", type(exc).__name__)
    # HandoverBacklogFull, SessionBytesFull or UserSessionsFull: the class is the kind.
    return refusal(429, str(exc), type(exc).__name__, retry_after_s=HANDOVER_RETRY_AFTER_S)


async def _handover_refused(request: Request, exc: Exception) -> JSONResponse:
    return handover_refused(exc)


_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _loc_part(part: Any) -> Any:
    # A location names fields; anything else there (an unknown key the client
    # sent) is the client's data and is not echoed.
    return part if isinstance(part, int) or _FIELD_NAME.match(str(part)) else "…"


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """A 422 that says where and what, never the input: FastAPI's default echoes it
    whole (a 10 MB body, a diagnosis in a query) and fails to encode a lone
    surrogate or NaN, which turned bad input into a 500."""
    assert isinstance(exc, RequestValidationError)
    errors = [{"type": error.get("type", "invalid"),
               "loc": [_loc_part(part) for part in error.get("loc", ())],
               "msg": str(error.get("msg", "invalid"))[:200]}
              for error in exc.errors()[:20]]
    return JSONResponse({"detail": errors}, status_code=422)


def install_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StoreError, _store_error)
    app.add_exception_handler(MemoryOptedOut, _memory_off)
    app.add_exception_handler(StoreConflict, _store_conflict)
    app.add_exception_handler(ProviderError, _provider_error)
    app.add_exception_handler(RedisError, _redis_error)
    app.add_exception_handler(HandoverTooLarge, _handover_refused)
    app.add_exception_handler(HandoverBacklogFull, _handover_refused)
    app.add_exception_handler(UserSessionsFull, _handover_refused)
