"""`memfleet mcp`: the memory tools and the known-facts block as an MCP server, over
stdio or streamable HTTP (the `mcp` extra; docs/mcp.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING

from worker.cli.common import Commands
from worker.config import Settings
from worker.errors import ConfigurationError, MemfleetError

if TYPE_CHECKING:
    from worker.client.memory_api_async import AsyncMemoryApi

DESCRIPTION = """Serve a user's memory to MCP clients (docs/mcp.md): the memory tools
(search, save, forget, list) and the known-facts block, through the memory API at
--api-url. Over stdio (the default) it acts for the user named by --user, with the
credential in MEMFLEET_SERVICE_KEY (a service key) or MEMFLEET_USER_TOKEN (that user's
token), never on the command line. With --http each request brings its own credential:
a user's token, or a service key with the user in X-Memfleet-User. Needs the `mcp` extra."""

SERVICE_KEY_VAR = "MEMFLEET_SERVICE_KEY"
USER_TOKEN_VAR = "MEMFLEET_USER_TOKEN"  # noqa: S105 - the variable's name, not a token


def register(commands: Commands) -> None:
    parser = commands.add_parser("mcp", help="serve a user's memory to MCP clients, over "
                                             "stdio or HTTP (the `mcp` extra)",
                                 description=DESCRIPTION)
    parser.add_argument("--api-url", default=os.environ.get("MEMFLEET_API_URL"),
                        help="the memory API's base URL (default: MEMFLEET_API_URL)")
    parser.add_argument("--user", help="stdio: the user the server acts for")
    parser.add_argument("--agent", help="stdio: the agent (assistant) whose relationship "
                                        "facts it reads and saves")
    parser.add_argument("--http", action="store_true",
                        help="serve streamable HTTP at /mcp instead of stdio")
    parser.add_argument("--host", default="127.0.0.1",
                        help="--http: the address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8090,
                        help="--http: the port to listen on (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="the longest a tool call or read waits for the memory API "
                             "(default: %(default)s)")
    parser.add_argument("--log-level", type=str.upper, default="WARNING",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="stderr's least severe log lines (default: %(default)s)")
    parser.set_defaults(handler=cmd_mcp)


def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    del settings  # the server reaches memory through the API alone
    if not args.api_url:
        raise MemfleetError("`memfleet mcp` needs --api-url (or MEMFLEET_API_URL): the "
                            "memory API it acts through")
    if not args.timeout > 0:
        raise MemfleetError("--timeout must be a positive number of seconds")
    try:
        from worker.mcp import server
    except ModuleNotFoundError as exc:  # an install without the extra
        raise ConfigurationError(f"`memfleet mcp` needs the mcp extra ({exc.name} is "
                                 "missing): pip install 'memfleet[mcp]'") from exc
    # stderr only: over stdio, stdout is the protocol's.
    logging.basicConfig(stream=sys.stderr, level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # httpx logs each request's URL at INFO: a search's query and the user's id are in it.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    if args.http:
        if args.user or args.agent:
            raise MemfleetError("--user and --agent are for stdio: over --http each request "
                                "names its user (its token, or X-Memfleet-User)")
        from worker.mcp.http import serve_http

        return serve_http(args.api_url, args.host, args.port, call_timeout_s=args.timeout,
                          log_level=args.log_level)
    if not args.user:
        raise MemfleetError("`memfleet mcp` over stdio needs --user: the user it acts for")
    api = _stdio_client(args.api_url, args.timeout)
    asyncio.run(server.serve_stdio(api, args.user, args.agent, call_timeout_s=args.timeout))
    return 0


def _stdio_client(api_url: str, timeout_s: float) -> AsyncMemoryApi:
    from worker.client.memory_api_async import AsyncMemoryApi

    key, token = os.environ.get(SERVICE_KEY_VAR), os.environ.get(USER_TOKEN_VAR)
    if key and token:
        raise MemfleetError(f"both {SERVICE_KEY_VAR} and {USER_TOKEN_VAR} are set: set one")
    if not key and not token:
        raise MemfleetError(f"`memfleet mcp` needs a credential in its environment: "
                            f"{SERVICE_KEY_VAR} (a service key) or {USER_TOKEN_VAR} (the "
                            "user's token); never on the command line")
    return AsyncMemoryApi(api_url, service_key=key or None, token=token or None,
                          timeout_s=timeout_s)
