"""A minimal HTTP/1.1 keep-alive client for benches that should measure the server, not
their own client.

httpx costs its process about 0.8 ms of CPU per request on the 2-core VM
(docs/bench.md), as much as the memory API spends answering a hand-over; at 16 in
flight the bench then measured its own queue. This one writes a request as one
buffer (request line, fixed headers, body) and reads the status line, the headers
and a Content-Length body; nothing else: no chunked bodies, no redirects, no TLS,
no pool (a caller holds its own connections). A response it cannot read raises
RawHttpError, and the connection is not used again.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_HEAD_LINES = 100


class RawHttpError(Exception):
    """A response this client does not read (or none): the connection is closed."""


@dataclass(frozen=True, slots=True)
class RawResponse:
    status: int
    headers: dict[str, str]  # names lower-case; a repeated name keeps its last value
    body: bytes


class RawConnection:
    """One keep-alive connection to ``url`` (http://host:port), one request at a time,
    every request with ``headers`` (e.g. the Authorization header)."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"only http://host:port URLs, not {url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        fixed = {"Host": parts.netloc, **(headers or {})}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is not None and self._reader.at_eof():
            # The server closed it while it was idle (its keep-alive timeout): a new one.
            await self.aclose()
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self._reader, self._writer

    async def request(self, method: str, path: str, body: bytes | None = None, *,
                      content_type: str = "application/json") -> RawResponse:
        reader, writer = await self._open()
        head = b"%s %s HTTP/1.1\r\n%s" % (method.encode("ascii"), path.encode("ascii"),
                                          self._fixed)
        if body is not None:
            head += b"Content-Type: %s\r\nContent-Length: %d\r\n" % (
                content_type.encode("latin-1"), len(body))
        writer.write(head + b"\r\n" + (body or b""))
        try:
            return await self._response(reader)
        except (RawHttpError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            await self.aclose()
            if isinstance(exc, RawHttpError):
                raise
            raise RawHttpError(f"no readable response: {type(exc).__name__}") from exc

    async def _response(self, reader: asyncio.StreamReader) -> RawResponse:
        status_line = await reader.readline()
        version, _, rest = status_line.partition(b" ")
        if not version.startswith(b"HTTP/1.") or len(rest) < 3:
            raise RawHttpError("the response has no HTTP/1.x status line")
        status = int(rest[:3])
        headers: dict[str, str] = {}
        for _ in range(MAX_HEAD_LINES):
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, sep, value = line.partition(b":")
            if not sep:
                raise RawHttpError("a header line without a colon")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        else:
            raise RawHttpError(f"more than {MAX_HEAD_LINES} header lines")
        if "transfer-encoding" in headers:
            raise RawHttpError("a chunked (or otherwise encoded) body is not read here")
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.aclose()
        return RawResponse(status, headers, body)

    async def aclose(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
