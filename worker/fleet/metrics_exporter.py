"""``memfleet exporter``: the fleet's gauges (worker.fleet.probe), exported once for the fleet.

One process per fleet, apart from the workers, so the numbers an autoscaler
reads exist when no worker runs (scale to zero) and are not multiplied by the
replicas. It serves ``/metrics`` and ``/healthz`` (Redis answers) like a
worker, and probes Redis every MEMFLEET_QUEUE_PROBE_INTERVAL_S.
"""

from __future__ import annotations

import asyncio
import os
import socket

import structlog
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest
from redis.asyncio import Redis

from worker.config import Settings
from worker.fleet import periodic, probe
from worker.fleet.metrics import FleetMetrics, MetricsServer

log = structlog.get_logger("memfleet.exporter")

DEFAULT_PORT = 9464


def fleet_meter(registry: CollectorRegistry) -> tuple[MeterProvider, FleetMetrics]:
    resource = Resource.create({"service.name": "memfleet-exporter",
                                "service.instance.id": f"{socket.gethostname()}-{os.getpid()}"})
    provider = MeterProvider(resource=resource, metric_readers=[
        PrometheusMetricReader(registry=registry, scope_info_enabled=False)])
    return provider, FleetMetrics(provider.get_meter("memfleet.exporter"))


async def keep_probing(metrics: FleetMetrics, redis: Redis, settings: Settings) -> None:
    """Probe until cancelled. A failed probe never stops the exporter: the last
    numbers stay, and /healthz says Redis is not answering."""

    async def probe_once() -> None:
        metrics.fleet = await probe.probe(redis, settings.queue_name)

    await periodic.every(settings.queue_probe_interval_s, probe_once, name="fleet probe")


async def run_exporter(settings: Settings) -> None:
    """Serve the fleet's gauges until cancelled."""
    registry = CollectorRegistry()
    provider, metrics = fleet_meter(registry)
    redis = Redis.from_url(settings.redis_url or "")
    server = MetricsServer(lambda: bytes(generate_latest(registry)), redis.ping)
    port = await server.start(settings.metrics_host,
                              DEFAULT_PORT if settings.metrics_port is None
                              else settings.metrics_port)
    log.info("serving the fleet's /metrics and /healthz", port=port)
    probing = asyncio.create_task(keep_probing(metrics, redis, settings))
    try:
        await probing
    finally:
        await periodic.stop(probing)
        await server.stop()
        await redis.aclose()
        provider.shutdown()
