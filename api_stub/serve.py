"""Run the memory API: ``python -m api_stub.serve --port 8088``.

Settings come from MEMFLEET_* variables, read once here; with no database or
Redis URL the embedded servers are started or reused, as `memfleet` does.
``--write-openapi FILE`` writes the OpenAPI document instead of serving.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import sys
from pathlib import Path

from fastapi import FastAPI
from pydantic import ValidationError
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from api_stub.event_stream import STATE_KEY as STREAMS_STATE_KEY
from worker.config import Settings, settings_error
from worker.errors import MemfleetError


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
    for every open response, and an event stream (api_stub.event_stream) never
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


def app_from_env() -> FastAPI:
    """The app from MEMFLEET_* settings; uvicorn calls this once per worker process."""
    from api_stub.app import create_app
    from worker.telemetry import configure_logging

    configure_logging(os.environ.get(LOG_LEVEL_ENV, "INFO"))  # the access log's lines
    settings = _settings()
    NoDelayHttpProtocol.send_timeout_s = settings.api_send_timeout_s
    return create_app(settings, tune_gc=True)


def _settings() -> Settings:
    from worker.cli.common import resolve

    return resolve(Settings())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m api_stub.serve", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8088)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes (each builds its own pools and clients)")
    parser.add_argument("--write-openapi", type=Path, metavar="FILE",
                        help="write the OpenAPI document to FILE and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.write_openapi is not None:
            from api_stub.app import openapi_json

            args.write_openapi.write_text(openapi_json(), "utf-8")
            return 0
        import uvicorn

        os.environ[LOG_LEVEL_ENV] = args.log_level.upper()  # for each server process

        # Settings, servers (embedded ones started) and the schema, once, up front.
        from api_stub.app import create_app
        from worker.ops.preflight import check_servers

        settings = _settings()
        create_app(settings)
        asyncio.run(check_servers(settings))
        uvicorn.run("api_stub.serve:app_from_env", factory=True, host=args.host,
                    port=args.port, log_level=args.log_level, workers=args.workers,
                    # api_stub.guards.AccessLog logs requests without their ids or query.
                    access_log=False,
                    # By name: under ``python -m`` this module is __main__, and the class
                    # app_from_env configures is the one of the module uvicorn imports.
                    http="api_stub.serve:NoDelayHttpProtocol")
    except ValidationError as exc:
        print(f"api_stub: {settings_error(exc)}", file=sys.stderr)
        return 2
    except MemfleetError as exc:
        print(f"api_stub: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
