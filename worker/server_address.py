"""Why a server could not be reached, in one line an operator can act on: which server,
where (host and port, never the URL's user or password), what went wrong, and which
setting to check. The store and the protocol name their drivers' own errors; the
network's are read here."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit


def address(url: str | None) -> str:
    """``host:port`` of a server URL (the socket path of a ``unix://`` one); never its
    credentials, its database or its query."""
    if not url:
        return "(no URL)"
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        return "(an unreadable URL)"
    if parts.scheme == "unix":
        return parts.path or "(no socket path)"
    if not host:
        return "(no host)"
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port is not None else shown


def network_reason(exc: BaseException) -> str | None:
    """What the network said (refused, no such host, no answer), read from ``exc`` and
    the errors it was raised from; None when it was not the network."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror):
            return "no such host"
        if isinstance(current, ConnectionRefusedError):
            return "connection refused: is the server running?"
        if isinstance(current, TimeoutError):
            return "no answer in time"
        if isinstance(current, OSError):
            return (current.strerror or type(current).__name__).lower()
        current = current.__cause__ or current.__context__
    return None


def unreachable(server: str, setting: str, url: str | None, reason: str) -> str:
    """``PostgreSQL at db:5432 is unreachable (no such host): check MEMFLEET_DATABASE_URL``."""
    return f"{server} at {address(url)} is unreachable ({reason}): check {setting}"
