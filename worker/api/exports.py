"""Exports over HTTP that no client can use to hold the API's database pool.

- **Per user, fleet-wide**: at most MEMFLEET_API_EXPORTS_PER_USER exports of one
  user at once, counted in Redis (leases in ``memfleet:api-exports:{<user>}``,
  scored by expiry, renewed while the download goes on, so a crashed process's
  lease lapses); one more is a 429 with Retry-After.
- **Per process**: at most MEMFLEET_API_EXPORTS_MAX at once (they hold a spool
  and a file descriptor each); one more is a 503 with Retry-After.
- **The pool**: snapshots are read by at most half the pool's connections at
  once, each waiting at most MEMFLEET_API_EXPORT_ACQUIRE_TIMEOUT_S for its turn
  and its connection, and taking at most MEMFLEET_API_EXPORT_READ_TIMEOUT_S to
  read (worker.ops.access_export.spool_export); 503 otherwise. The connection goes back
  before the first byte is sent: a download holds a spool, never a connection.
- **The download**: a chunk the client takes nothing of for
  MEMFLEET_API_SEND_TIMEOUT_S ends it; its slot and spool are freed. (Our
  uvicorn protocol, worker.api.serve, aborts such a connection a little sooner.)

Why a spool rather than a small pool of its own: a dedicated pool still lets a
few clients that never read hold every export connection and an open
transaction each, which also holds back VACUUM; a spool costs disk (the user's
export, at most MEMFLEET_API_EXPORTS_MAX of them per process) and bounded memory.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import IO, Any

from fastapi import HTTPException, status
from redis.exceptions import RedisError
from starlette.responses import Response

from worker.api.settings import ApiSettings
from worker.ops.access_export import spool_export
from worker.protocol.keys import api_exports_key
from worker.protocol.scripts import LuaScript
from worker.store.base import MaintenanceStore

log = logging.getLogger("memfleet.api.exports")

SEND_CHUNK_BYTES = 64 * 1024
RETRY_AFTER_S = 5
# A lease outlives the longest stretch without renewal (reading the snapshot, one
# chunk's send) by this much.
LEASE_MARGIN_S = 10.0
# The download's own cut comes this much after our protocol's abort (worker.api.serve):
# under that protocol the abort ends it cleanly; under another server this does.
SEND_TIMEOUT_GRACE_S = 1.0

_TAKE = LuaScript("worker.api", "export_lease_take.lua")
_RENEW = LuaScript("worker.api", "export_lease_renew.lua")


def _busy(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=detail,
                         headers={"Retry-After": str(RETRY_AFTER_S)})


class ExportGate:
    """Admits exports and spools their snapshots; one per API process (ApiDeps)."""

    def __init__(self, redis: Any, store: MaintenanceStore, settings: ApiSettings) -> None:
        self._redis, self._store = redis, store
        self._per_user = settings.api_exports_per_user
        self._max = settings.api_exports_max
        self._acquire_timeout_s = settings.api_export_acquire_timeout_s
        self._read_timeout_s = settings.api_export_read_timeout_s
        self.send_timeout_s = settings.api_send_timeout_s + SEND_TIMEOUT_GRACE_S
        self._memory_default = settings.memory_default
        self.lease_s = max(self._read_timeout_s + self._acquire_timeout_s,
                            self.send_timeout_s) + LEASE_MARGIN_S
        # Snapshots being read take pooled connections: never more than half the pool.
        self._readers = asyncio.Semaphore(max(1, settings.db_pool_max // 2))
        self._in_flight = 0

    async def open(self, user_id: str) -> SpooledExport:
        """The user's export, ready to send; HTTPException 429 or 503 when it cannot be."""
        lease, key = secrets.token_hex(8), api_exports_key(user_id)
        # The user's bound first: one user's surplus is theirs (429), never the process's.
        if not await _TAKE(self._redis, [key], [lease, self._per_user,
                                                int(self.lease_s * 1000)]):
            raise HTTPException(
                status.HTTP_429_TOO_MANY_REQUESTS,
                detail=f"at most {self._per_user} exports of a user at once; retry later",
                headers={"Retry-After": str(RETRY_AFTER_S)})
        if self._in_flight >= self._max:
            await self._release(key, lease)
            raise _busy("too many exports are under way; retry later")
        self._in_flight += 1
        try:
            spool = await self._snapshot(user_id)
        except BaseException:
            await self.done(key, lease)
            raise
        return SpooledExport(self, spool, key, lease)

    async def _snapshot(self, user_id: str) -> IO[bytes]:
        try:
            async with asyncio.timeout(self._acquire_timeout_s):
                await self._readers.acquire()
        except TimeoutError:
            raise _busy("too many exports are being read; retry later") from None
        try:
            return await spool_export(self._store, user_id, memory_default=self._memory_default,
                                      acquire_timeout_s=self._acquire_timeout_s,
                                      read_timeout_s=self._read_timeout_s)
        finally:
            self._readers.release()

    async def renew(self, key: str, lease: str) -> None:
        try:
            await _RENEW(self._redis, [key], [lease, int(self.lease_s * 1000)])
        except RedisError as exc:  # the lease lapses on its own; the download goes on
            log.warning("export: lease not renewed: %s", type(exc).__name__)

    async def _release(self, key: str, lease: str) -> None:
        try:
            await self._redis.zrem(key, lease)
        except RedisError as exc:  # the lease lapses on its own
            log.warning("export: lease not released: %s", type(exc).__name__)

    async def done(self, key: str, lease: str) -> None:
        self._in_flight -= 1
        await self._release(key, lease)


class SpooledExport(Response):
    """An export's bytes from its spool, each chunk within the send timeout; the
    spool, the process's slot and the user's lease are given back however it ends."""

    def __init__(self, gate: ExportGate, spool: IO[bytes], key: str, lease: str) -> None:
        size = spool.seek(0, 2)
        spool.seek(0)
        super().__init__(headers={"content-length": str(size)}, media_type="application/json")
        self._gate, self._spool, self._key, self._lease = gate, spool, key, lease

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        gate = self._gate
        renewed = time.monotonic()
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            while True:
                chunk = self._spool.read(SEND_CHUNK_BYTES)
                more = len(chunk) == SEND_CHUNK_BYTES
                async with asyncio.timeout(gate.send_timeout_s):
                    await send({"type": "http.response.body", "body": chunk,
                                "more_body": more})
                if not more:
                    return
                if time.monotonic() - renewed > gate.lease_s / 3:
                    await gate.renew(self._key, self._lease)
                    renewed = time.monotonic()
        except TimeoutError:
            # Returning without the rest: the server closes the connection.
            log.info("export: the client took nothing for %g s; cut", gate.send_timeout_s)
        finally:
            self._spool.close()
            await gate.done(self._key, self._lease)
