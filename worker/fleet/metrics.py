"""Fleet metrics: OpenTelemetry instruments, exported over OTLP and on /metrics.

Each worker process serves ``/metrics`` (Prometheus text) and ``/healthz``
(Redis and PostgreSQL answer) on MEMFLEET_METRICS_PORT: ``Metrics``, what the
process does. ``FleetMetrics``, what the whole fleet owes, is served once by
``memfleet exporter`` (worker.fleet.metrics_exporter). Labels never carry
user content or ids: only stage, outcome, event, model, direction, kind.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from worker.fleet.probe import FleetSnapshot


@dataclass
class Metrics:
    """The instruments the pipeline records into; names match the Grafana dashboard."""

    meter: Meter
    # The ids of the jobs this process runs: counted here, named in its heartbeat
    # (worker.fleet.probe).
    running: set[str] = field(default_factory=set)

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
        # The fleet's model budget (worker.providers.budget).
        self.budget_wait = m.create_histogram(
            "memfleet.llm.budget.wait", "s",
            "Time a model call waited for the fleet's budget before it was sent",
            explicit_bucket_boundaries_advisory=[
                0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
            ],
        )
        self.budget_waits = m.create_counter(
            "memfleet.llm.budget.waits", "{call}",
            "Model calls that had to wait for the budget, by the first reason"
            " (rpm, tpm, concurrency, paused)")
        self.budget_pauses = m.create_counter(
            "memfleet.llm.budget.pauses", "{pause}",
            "Fleet-wide pauses of the model calls set after a 429 with Retry-After")
        self.expired = m.create_counter(
            "memfleet.facts.expired", "{fact}",
            "Facts past their expires_at superseded by this process's expiry pass")
        self.refused_cas = m.create_counter(
            "memfleet.cas.refused", "{commit}",
            "Persist transactions refused by a compare-and-set, by fence")
        self.lag = m.create_histogram(
            "memfleet.handover.lag", "s", "From hand-over to the commit of its slice",
            explicit_bucket_boundaries_advisory=[
                0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800,
            ],
        )
        m.create_observable_gauge("memfleet.worker.running_jobs", [self._observe_running],
                                  "{job}", "Jobs running in this worker process")

    def _observe_running(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(len(self.running))


@dataclass
class FleetMetrics:
    """The fleet-wide gauges, exported by the one exporter process
    (worker.fleet.metrics_exporter)."""

    meter: Meter
    fleet: FleetSnapshot = field(default_factory=FleetSnapshot)

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

    def _observe_depth(self, options: CallbackOptions) -> Iterable[Observation]:
        fleet = self.fleet
        yield Observation(fleet.ready, {"state": "ready"})
        yield Observation(fleet.in_progress - fleet.orphaned, {"state": "in_progress"})
        yield Observation(fleet.orphaned, {"state": "orphaned"})
        yield Observation(fleet.deferred, {"state": "deferred"})

    def _observe_age(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.fleet.oldest_ready_age_s)

    def _observe_lag(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.fleet.lag_s)

    def _observe_waiting(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.fleet.sessions_waiting)

    def _observe_workers(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.fleet.workers)


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
