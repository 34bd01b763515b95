"""The memory API's server: `memfleet api` (the `api` extra; docs/api.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from worker.cli.common import Commands
from worker.errors import ConfigurationError

if TYPE_CHECKING:
    from worker.api.settings import ApiSettings

DESCRIPTION = """Serve the memory API over HTTP (docs/api.md): a user's facts, the hand-over,
the memory panel. Settings come from MEMFLEET_* variables (MEMFLEET_JWT_SECRET at least);
without a database or Redis URL the embedded servers are used. Needs the `api` extra."""


def add_options(parser: argparse.ArgumentParser) -> None:
    """The server's options: `memfleet api`'s, and those of an entry that serves the API
    with extensions (api_stub.chat_app)."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8088,
                        help="the port to listen on (default: %(default)s)")
    parser.add_argument("--log-level", default="info",
                        help="uvicorn's and the access log's level (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes (each builds its own pools and clients)")
    parser.add_argument("--write-openapi", type=Path, metavar="FILE",
                        help="write the OpenAPI document to FILE and exit")


def register(commands: Commands) -> None:
    parser = commands.add_parser("api", help="serve the memory API over HTTP (the `api` extra)",
                                 description=DESCRIPTION)
    add_options(parser)
    parser.set_defaults(handler=cmd_api, read_settings=read_api_settings)


def read_api_settings() -> ApiSettings:
    """The API's settings, its own with the fleet's, read once (worker.cli.main): other
    commands read the fleet's alone. worker.api.settings needs no FastAPI."""
    from worker.api.settings import ApiSettings

    return ApiSettings()


def cmd_api(settings: ApiSettings, args: argparse.Namespace) -> int:
    try:
        from worker.api.serve import serve
    except ModuleNotFoundError as exc:  # a worker-only install: no FastAPI, no uvicorn
        raise ConfigurationError(f"`memfleet api` needs the api extra ({exc.name} is "
                                 "missing): pip install 'memfleet[api]'") from exc
    return serve(settings, args)
