"""A webhook receiver on loopback for the tests of `memfleet webhook`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Post:
    """One POST as the receiver saw it; ``status`` None: held, never answered."""

    headers: dict[str, str]
    body: bytes
    status: int | None


class Receiver:
    """A webhook receiver on loopback: answers ``statuses`` in turn (then 200) and records
    every request as it arrives. With ``hold_first`` the first request is never answered:
    its connection stays open until the sender dies (or the receiver closes)."""

    def __init__(self, statuses: list[int], *, hold_first: bool = False) -> None:
        self.statuses = statuses
        self.requests: list[Post] = []
        self.hold_first = hold_first
        self.closing = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    held = receiver.hold_first and not receiver.requests
                    status = None if held else (receiver.statuses.pop(0)
                                                if receiver.statuses else 200)
                    receiver.requests.append(Post(headers, body, status))
                if status is None:
                    receiver.closing.wait(60)
                    self.close_connection = True
                    return  # no answer at all
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self) -> dict[str, bytes]:
        """Event id -> body, for requests answered 2xx."""
        return {p.headers["x-memfleet-event-id"]: p.body for p in list(self.requests)
                if p.status is not None and p.status < 300}

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
