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


async def keep_probing(metrics: FleetMetrics, shards: dict[str, Redis],
                       settings: Settings) -> None:
    """Probe every shard until cancelled. A failed probe never stops the exporter: that
    shard's last numbers stay, and /healthz says a Redis is not answering."""

    async def probe_once() -> None:
        failed: BaseException | None = None
        for name, redis in shards.items():
            try:
                metrics.fleet[name] = await probe.probe(redis, settings.queue_name)
            except Exception as exc:  # noqa: BLE001 - the other shards are still probed
                failed = exc
        if failed is not None:
            raise failed

    await periodic.every(settings.queue_probe_interval_s, probe_once, name="fleet probe")


async def run_exporter(settings: Settings) -> None:
    """Serve the fleet's gauges, per shard (label ``shard``), until cancelled."""
    registry = CollectorRegistry()
    provider, metrics = fleet_meter(registry)
    shards = {name: Redis.from_url(url) for name, url in settings.redis_shard_entries}

    async def every_shard_answers() -> None:
        for redis in shards.values():
            await redis.ping()

    server = MetricsServer(lambda: bytes(generate_latest(registry)), every_shard_answers)
    port = await server.start(settings.metrics_host,
                              DEFAULT_PORT if settings.metrics_port is None
                              else settings.metrics_port)
    log.info("serving the fleet's /metrics and /healthz", port=port)
    probing = asyncio.create_task(keep_probing(metrics, shards, settings))
    try:
        await probing
    finally:
        await periodic.stop(probing)
        await server.stop()
        for redis in shards.values():
            await redis.aclose()
        provider.shutdown()
