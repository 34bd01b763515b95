"""The OpenAI stub's faults: what a test queues, and how each one is served.

The modes are listed in api_stub.llm_stub's docstring; the chat-content modes
(a broken or hostile answer) are api_stub.llm_answers'.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from api_stub.llm_answers import CONTENT_MODES

OTHER_MODES = frozenset({"timeout", "hold", "latency_ms", "wrong_count", "wrong_dim"})


def error_response(status: int, message: str, param: str | None = None, **headers: str) -> Response:
    body = {"error": {"message": message, "type": "invalid_request_error" if status < 500
                      else "server_error", "param": param, "code": None}}
    return JSONResponse(body, status_code=status, headers=headers)


@dataclass
class Fault:
    mode: str
    count: int = 1
    path: str | None = None
    task: str | None = None
    retry_after: str | float | None = None  # the header value, seconds or an HTTP-date
    retry_after_ms: int | None = None
    sleep_s: float = 10.0
    latency_ms: int = 0
    # An HTTP-status fault whose error message quotes the request body, as real
    # endpoints' validation errors do (the worker must not pass it on).
    echo: bool = False
    targets: list[int] | None = None  # "aimed_ids": the ids the decisions aim at

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Fault:
        mode = str(raw.get("mode", ""))
        if not (mode in CONTENT_MODES | OTHER_MODES or (mode.isdigit() and len(mode) == 3)):
            raise ValueError(f"unknown fault mode {mode!r}")
        fault = cls(**{k: v for k, v in raw.items() if k in cls.__dataclass_fields__})
        if fault.count < 1:
            raise ValueError("count must be at least 1")
        return fault


async def status_fault(request: Request, fault: Fault | None) -> Response | None:
    """A timeout sleeps here, a latency is noted for ``answered_after_latency``, and an
    HTTP-status fault becomes the response."""
    if fault is None:
        return None
    if fault.mode == "timeout":
        await asyncio.sleep(fault.sleep_s)
    elif fault.mode == "hold":
        # A threading.Event: tests release it from their own thread (POST /_stub/release).
        await asyncio.to_thread(request.app.state.stub.released.wait, fault.sleep_s)
    elif fault.mode == "latency_ms":
        request.state.latency_ms = fault.latency_ms
    elif fault.mode.isdigit():
        hints = {"retry-after": fault.retry_after, "retry-after-ms": fault.retry_after_ms}
        headers = {name: str(value) for name, value in hints.items() if value is not None}
        message = f"stub fault {fault.mode}"
        if fault.echo:
            message += ": " + (await request.body()).decode(errors="replace")
        return error_response(int(fault.mode), message, **headers)
    return None


Handler = Callable[[Request], Awaitable[Response]]


def answered_after_latency(handler: Handler) -> Handler:
    """The handler's response, held until a "latency_ms" fault's delay has passed since
    the request arrived: the answer is built within the delay, as a model's would be,
    so the stub's own work does not lengthen it."""
    @functools.wraps(handler)
    async def answer(request: Request) -> Response:
        arrived = time.monotonic()
        response = await handler(request)
        latency_ms: int = getattr(request.state, "latency_ms", 0)
        if latency_ms:
            await asyncio.sleep(max(0.0, arrived + latency_ms / 1000 - time.monotonic()))
        return response
    return answer
