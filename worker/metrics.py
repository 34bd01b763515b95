"""Fleet metrics: OpenTelemetry instruments, exported over OTLP and on /metrics.

Each worker process serves ``/metrics`` (Prometheus text) and ``/healthz``
(Redis and PostgreSQL answer) on MEMFLEET_METRICS_PORT. Labels never carry
user content or ids: only stage, outcome, event, model, direction, kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog
from opentelemetry.metrics import CallbackOptions, Meter, Observation

log = structlog.get_logger("memfleet.metrics")


@dataclass(slots=True)
class QueueSnapshot:
    ready: int = 0
    deferred: int = 0
    oldest_ready_age_s: float = 0.0


@dataclass
class Metrics:
    """The instruments the pipeline records into; names match the Grafana dashboard."""

    meter: Meter
    queue: QueueSnapshot = field(default_factory=QueueSnapshot)
    running_jobs: int = 0

    def __post_init__(self) -> None:
        m = self.meter
        self.jobs = m.create_counter("memfleet.jobs", "{job}", "Jobs by outcome")
        self.stage_duration = m.create_histogram(
            "memfleet.stage.duration", "s", "Duration of each pipeline stage",
            explicit_bucket_boundaries_advisory=[
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                10, 30, 60,
            ],
        )
        self.decisions = m.create_counter("memfleet.decisions", "{decision}",
                                          "Consolidation decisions applied, by event")
        self.tokens = m.create_counter("memfleet.llm.tokens", "{token}",
                                       "LLM tokens by model and direction")
        self.llm_errors = m.create_counter("memfleet.llm.errors", "{error}",
                                           "LLM and embedding failures by kind")
        self.lock_contention = m.create_counter(
            "memfleet.lock.contention", "{job}", "Jobs that found the session lock busy")
        self.recovered = m.create_counter(
            "memfleet.sessions.recovered", "{session}",
            "Sessions a dead worker left locked, queued again by the recovery pass")
        self.breaker_trips = m.create_counter(
            "memfleet.llm.breaker.trips", "{trip}",
            "Times a job opened the fleet's circuit breaker on the model endpoint")
        self.refused_cas = m.create_counter(
            "memfleet.cas.refused", "{commit}",
            "Persist transactions refused by a compare-and-set, by fence")
        self.lag = m.create_histogram(
            "memfleet.handover.lag", "s", "From hand-over to the commit of its slice",
            explicit_bucket_boundaries_advisory=[
                0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800,
            ],
        )
        m.create_observable_gauge("memfleet.queue.depth", [self._observe_depth], "{job}",
                                  "Jobs in the queue, ready or deferred")
        m.create_observable_gauge("memfleet.queue.oldest_ready_age", [self._observe_age],
                                  "s", "Age of the oldest job ready to run")
        m.create_observable_gauge("memfleet.worker.running_jobs", [self._observe_running],
                                  "{job}", "Jobs running in this worker process")

    def _observe_depth(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.queue.ready, {"state": "ready"})
        yield Observation(self.queue.deferred, {"state": "deferred"})

    def _observe_age(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.queue.oldest_ready_age_s)

    def _observe_running(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.running_jobs)


async def probe_queue(redis: Any, queue_name: str) -> QueueSnapshot:
    """Ready and deferred counts and the oldest ready job's age, from the ARQ sorted set."""
    now_ms = time.time() * 1000
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zcount(queue_name, "-inf", now_ms)
        pipe.zcount(queue_name, f"({now_ms}", "+inf")
        pipe.zrange(queue_name, 0, 0, withscores=True)
        ready, deferred, oldest = await pipe.execute()
    age = 0.0
    if oldest and oldest[0][1] <= now_ms:
        age = (now_ms - oldest[0][1]) / 1000
    return QueueSnapshot(int(ready), int(deferred), age)


async def keep_probing(metrics: Metrics, redis: Any, queue_name: str, every_s: float) -> None:
    while True:
        try:
            metrics.queue = await probe_queue(redis, queue_name)
        except Exception as exc:  # noqa: BLE001 - a failed probe must never stop the worker
            log.warning("queue probe failed", error=type(exc).__name__)
        await asyncio.sleep(every_s)


HealthCheck = Callable[[], Awaitable[None]]


class MetricsServer:
    """A minimal HTTP server on the worker's own event loop: /metrics and /healthz."""

    def __init__(self, render: Callable[[], bytes], health: HealthCheck) -> None:
        self._render, self._health = render, health
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._handle, host, port)
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
            elif path in ("/healthz", "/readyz"):
                try:
                    await asyncio.wait_for(self._health(), 2)
                    status, kind, body = "200 OK", "application/json", b'{"status":"ok"}'
                except Exception as exc:  # noqa: BLE001 - any failure means: not healthy
                    status, kind = "503 Service Unavailable", "application/json"
                    body = b'{"status":"unavailable","error":"%s"}' % type(exc).__name__.encode()
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
