"""Serve the memory API: `memfleet api --port 8088` (worker.cli.api parses the options).

The API's settings (worker.api.settings.ApiSettings) come from MEMFLEET_* variables;
with no database or Redis URL the embedded servers are started or reused, as every
`memfleet` command does.
``--write-openapi FILE`` writes the OpenAPI document instead of serving. uvicorn
builds the app in each server process from a factory named by its import path:
``app_from_env`` here, or an entry outside the product that passes extensions
(api_stub.chat_app, the chat stand-in).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
from collections.abc import Callable

from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from worker.api.event_stream import STATE_KEY as STREAMS_STATE_KEY
from worker.api.settings import ApiSettings


class NoDelayHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol (a C parser; h11 is pure Python and costs the
    API process more CPU per request) with TCP_NODELAY on every connection.

    With ``--workers`` uvicorn binds the listening socket itself without naming
    TCP, so asyncio does not set TCP_NODELAY on accepted connections; uvicorn
    writes a response's head and body separately, and the body then waits for
    the client's delayed ACK (Nagle's algorithm), which dwarfs the turn itself.

    It also aborts a connection whose client takes nothing of its response for
    ``send_timeout_s`` (MEMFLEET_API_SEND_TIMEOUT_S, set by app_from_env in each
    server process): writing stays paused (the buffers are full) that long. A
    plain close would keep the buffers for a reader that never comes.

    And it tells the app when the server starts to shut down: uvicorn then waits
    for every open response, and an event stream (worker.api.event_stream) never
    ends by itself; the app's EventStreams, in the lifespan state, end them.
    """

    send_timeout_s: float = 30.0
    _stalled: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)

    def shutdown(self) -> None:
        streams = self.app_state.get(STREAMS_STATE_KEY)
        if streams is not None:
            streams.close()
        super().shutdown()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled is None:
            self._stalled = self.loop.call_later(self.send_timeout_s, self._reset)

    def resume_writing(self) -> None:
        self._stop_watch()
        super().resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_watch()
        super().connection_lost(exc)

    def _reset(self) -> None:
        # Linger 0: the kernel drops what it still holds for the peer and answers with
        # a reset; a plain close keeps the data queued for a reader that never comes.
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def _stop_watch(self) -> None:
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None


# The --log-level for app_from_env, which uvicorn calls in each server process.
LOG_LEVEL_ENV = "MEMFLEET_API_LOG_LEVEL"
# The factory uvicorn imports in each server process, by name: the product's app.
APP_FACTORY = "worker.api.serve:app_from_env"

AppBuilder = Callable[..., FastAPI]  # create_app's signature: (settings, *, tune_gc)


def app_from_env(create: AppBuilder | None = None) -> FastAPI:
    """The app from MEMFLEET_* settings; uvicorn calls this once per worker process
    (an entry with extensions calls it with its own ``create``)."""
    from worker.api.app import create_app
    from worker.telemetry import configure_logging

    configure_logging(os.environ.get(LOG_LEVEL_ENV, "INFO"))  # the access log's lines
    settings = _settings(ApiSettings())
    NoDelayHttpProtocol.send_timeout_s = settings.api_send_timeout_s
    return (create or create_app)(settings, tune_gc=True)


def _settings(settings: ApiSettings) -> ApiSettings:
    from worker.cli.common import resolve

    return resolve(settings)


def serve(settings: ApiSettings, args: argparse.Namespace, *, factory: str = APP_FACTORY,
          create: AppBuilder | None = None) -> int:
    """Serve with the options of worker.cli.api (host, port, log level, workers, or
    write the OpenAPI document); ``factory`` and ``create`` name the same app, by
    import path (for uvicorn's processes) and as a function (checked here first).
    Settings and server errors raise (ValidationError, MemfleetError): the caller
    says them in one line."""
    from worker.api.app import create_app, openapi_json

    if args.write_openapi is not None:
        args.write_openapi.write_text(openapi_json(), "utf-8")
        return 0
    import uvicorn

    from worker.ops.preflight import check_servers

    os.environ[LOG_LEVEL_ENV] = args.log_level.upper()  # for each server process
    # Settings, servers (embedded ones started) and the schema, once, up front.
    settings = _settings(settings)
    (create or create_app)(settings)
    asyncio.run(check_servers(settings))
    uvicorn.run(factory, factory=True, host=args.host, port=args.port,
                log_level=args.log_level, workers=args.workers,
                # worker.api.guards.AccessLog logs requests without their ids or query.
                access_log=False,
                # By name: the class app_from_env configures is the one of the module
                # uvicorn imports in each server process.
                http="worker.api.serve:NoDelayHttpProtocol")
    return 0
