"""A TCP forwarder with a switchable target: the stable address (a virtual IP, a
pgbouncer, a DNS name) behind which a database fails over to another server."""

from __future__ import annotations

import asyncio
import contextlib


class SwitchableProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def switch(self, target_port: int) -> None:
        """Point new connections at ``target_port`` and cut the open ones, as a
        failover does."""
        self.target_port = target_port
        for writer in list(self._links):
            writer.close()
        self._links.clear()

    async def close(self) -> None:
        self.switch(self.target_port)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.close()
            return
        self._links |= {client_w, server_w}
        await asyncio.gather(self._pipe(client_r, server_w), self._pipe(server_r, client_w))
        self._links -= {client_w, server_w}

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()
