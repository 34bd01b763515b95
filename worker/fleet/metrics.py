"""Fleet metrics: the /metrics, /healthz and /readyz server, and the fleet-wide gauges.

Each worker process serves ``/metrics`` (Prometheus text), ``/healthz``
(liveness: the process answers, so its event loop turns) and ``/readyz``
(readiness: Redis and PostgreSQL answer; 503 naming those away) on
MEMFLEET_METRICS_PORT: ``Metrics``
(worker.metrics), what the process does. ``FleetMetrics``, what the whole
fleet owes, is served once by ``memfleet exporter``
(worker.fleet.metrics_exporter). Labels never carry user content or ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from worker.errors import ConfigurationError
from worker.fleet.probe import FleetSnapshot


@dataclass
class FleetMetrics:
    """The fleet-wide gauges, exported by the one exporter process
    (worker.fleet.metrics_exporter), one series per Redis shard (label ``shard``:
    ``default`` with MEMFLEET_REDIS_URL alone; worker.protocol.shards)."""

    meter: Meter
    fleet: dict[str, FleetSnapshot] = field(default_factory=dict)
    # Per shard: whether its last probe succeeded, and the Unix time of its last success
    # (when the numbers above were read; absent: never yet).
    probe_ok: dict[str, bool] = field(default_factory=dict)
    probed_at: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        m = self.meter
        m.create_observable_gauge("memfleet.queue.depth", [self._observe_depth], "{job}",
                                  "Jobs in the queue: ready, in progress, orphaned, deferred")
        m.create_observable_gauge("memfleet.queue.oldest_ready_age", [self._observe_age],
                                  "s", "Age of the oldest job ready to run")
        m.create_observable_gauge(
            "memfleet.fleet.lag", [self._observe_lag], "s",
            "Age of the oldest hand-over no commit has finished, over every session")
        m.create_observable_gauge("memfleet.fleet.sessions_waiting", [self._observe_waiting],
                                  "{session}", "Sessions with a hand-over no commit finished")
        m.create_observable_gauge("memfleet.fleet.workers", [self._observe_workers],
                                  "{worker}", "Worker processes alive, by their heartbeats")
        m.create_observable_gauge(
            "memfleet.exporter.probe_success", [self._observe_probe_ok], "",
            "1 if the exporter's last probe of the shard succeeded, 0 if it failed "
            "(the shard's other gauges then hold the last numbers read)")
        m.create_observable_gauge(
            "memfleet.exporter.probe_timestamp", [self._observe_probed_at], "s",
            "Unix time of the exporter's last successful probe of the shard")

    def _shards(self) -> Iterable[tuple[dict[str, str], FleetSnapshot]]:
        for shard, fleet in sorted(self.fleet.items()):
            yield {"shard": shard}, fleet

    def _observe_depth(self, options: CallbackOptions) -> Iterable[Observation]:
        for shard, fleet in self._shards():
            yield Observation(fleet.ready, {**shard, "state": "ready"})
            yield Observation(fleet.in_progress - fleet.orphaned, {**shard, "state": "in_progress"})
            yield Observation(fleet.orphaned, {**shard, "state": "orphaned"})
            yield Observation(fleet.deferred, {**shard, "state": "deferred"})

    def _observe_age(self, options: CallbackOptions) -> Iterable[Observation]:
        for shard, fleet in self._shards():
            yield Observation(fleet.oldest_ready_age_s, shard)

    def _observe_lag(self, options: CallbackOptions) -> Iterable[Observation]:
        for shard, fleet in self._shards():
            yield Observation(fleet.lag_s, shard)

    def _observe_waiting(self, options: CallbackOptions) -> Iterable[Observation]:
        for shard, fleet in self._shards():
            yield Observation(fleet.sessions_waiting, shard)

    def _observe_workers(self, options: CallbackOptions) -> Iterable[Observation]:
        for shard, fleet in self._shards():
            yield Observation(fleet.workers, shard)

    def _observe_probe_ok(self, options: CallbackOptions) -> Iterable[Observation]:
        for shard, ok in sorted(self.probe_ok.items()):
            yield Observation(int(ok), {"shard": shard})

    def _observe_probed_at(self, options: CallbackOptions) -> Iterable[Observation]:
        for shard, at in sorted(self.probed_at.items()):
            yield Observation(at, {"shard": shard})


# The servers away now, by name ("Redis", "PostgreSQL"); empty: ready.
ServersDown = Callable[[], Sequence[str]]


class MetricsServer:
    """A minimal HTTP server on the worker's own event loop: /metrics, /healthz, /readyz.

    /healthz is liveness: answered from the event loop, so a loop that no longer
    turns fails it by the probe's timeout; a server away never does (restarting the
    process would not bring it back). /readyz is readiness: ``down()``, what the
    process's checks last found (worker.fleet.server_watch), with no I/O per request."""

    def __init__(self, render: Callable[[], bytes], down: ServersDown) -> None:
        self._render, self._down = render, down
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port``; return the port (``0``: one the system chose). A port
        that cannot be had is a ConfigurationError naming MEMFLEET_METRICS_PORT."""
        try:
            self._server = await asyncio.start_server(self._handle, host, port)
        except OSError as exc:
            why = ("in use: another memfleet exporter or worker, or another program, "
                   "listens there" if exc.errno == errno.EADDRINUSE
                   else (exc.strerror or type(exc).__name__).lower())
            raise ConfigurationError(
                f"cannot serve /metrics on {host}:{port} ({why}): set MEMFLEET_METRICS_PORT "
                f"to a free port") from None
        sock = self._server.sockets[0]
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            path = request.split(b" ", 2)[1].decode("ascii", "replace")
            if path == "/metrics":
                status, kind, body = "200 OK", "text/plain; version=0.0.4", self._render()
            elif path == "/healthz":
                status, kind, body = "200 OK", "application/json", b'{"status":"ok"}'
            elif path == "/readyz":
                down = list(self._down())
                status, kind = ("503 Service Unavailable" if down else "200 OK",
                                "application/json")
                body = json.dumps({"status": "unavailable", "down": down} if down
                                  else {"status": "ok"}).encode()
            else:
                status, kind, body = "404 Not Found", "text/plain", b"not found"
            head = (f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
            writer.write(head.encode() + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError, IndexError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
