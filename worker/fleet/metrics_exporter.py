"""``memfleet exporter``: the fleet's gauges (worker.fleet.probe), exported once for the fleet.

One process per fleet, apart from the workers, so the numbers an autoscaler
reads exist when no worker runs (scale to zero) and are not multiplied by the
replicas. It serves ``/metrics``, ``/healthz`` (liveness) and ``/readyz`` (every
shard's last probe succeeded) like a worker, and probes Redis every
MEMFLEET_QUEUE_PROBE_INTERVAL_S. Whether each shard's last probe succeeded, and
when one last did, are gauges of their own (``memfleet_exporter_probe_success``,
``memfleet_exporter_probe_timestamp_seconds``): a failed probe leaves the shard's
other gauges at their last values. A shard lost and back is logged once each
(worker.fleet.server_watch).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time

import structlog
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest
from redis.asyncio import Redis

from worker.config import Settings
from worker.fleet import periodic, probe
from worker.fleet.metrics import FleetMetrics, MetricsServer
from worker.fleet.server_watch import Reachability

log = structlog.get_logger("memfleet.exporter")

DEFAULT_PORT = 9464
PROBE_TIMEOUT_S = 10.0


def fleet_meter(registry: CollectorRegistry) -> tuple[MeterProvider, FleetMetrics]:
    resource = Resource.create({"service.name": "memfleet-exporter",
                                "service.instance.id": f"{socket.gethostname()}-{os.getpid()}"})
    provider = MeterProvider(resource=resource, metric_readers=[
        PrometheusMetricReader(registry=registry, scope_info_enabled=False)])
    return provider, FleetMetrics(provider.get_meter("memfleet.exporter"))


def shard_server(name: str, count: int) -> str:
    """How /readyz and the log name a shard's Redis: "Redis", or "Redis shard NAME"."""
    return "Redis" if count == 1 else f"Redis shard {name}"


async def keep_probing(metrics: FleetMetrics, shards: dict[str, Redis],
                       settings: Settings) -> None:
    """Probe every shard until cancelled. A failed probe never stops the exporter: that
    shard's last numbers stay, its probe_success gauge says 0 and /readyz names it."""
    urls = dict(settings.redis_shard_entries)
    states = {name: Reachability(shard_server(name, len(shards)), urls.get(name))
              for name in shards}

    async def probe_once() -> None:
        failed: BaseException | None = None
        for name, redis in shards.items():
            try:
                metrics.fleet[name] = await probe.probe(redis, settings.queue_name)
            except Exception as exc:  # noqa: BLE001 - the other shards are still probed
                metrics.probe_ok[name] = False
                states[name].failed(exc)
                failed = exc
            else:
                metrics.probe_ok[name] = True
                metrics.probed_at[name] = time.time()
                states[name].answered()
        if failed is not None:
            raise failed

    await periodic.every(settings.queue_probe_interval_s, probe_once, name="fleet probe")


async def run_exporter(settings: Settings) -> None:
    """Serve the fleet's gauges, per shard (label ``shard``), until cancelled."""
    registry = CollectorRegistry()
    provider, metrics = fleet_meter(registry)
    # Bounded: a Redis that stops answering (a partition) fails the probe, never hangs it.
    shards = {name: Redis.from_url(url, socket_connect_timeout=PROBE_TIMEOUT_S,
                                   socket_timeout=PROBE_TIMEOUT_S)
              for name, url in settings.redis_shard_entries}

    def shards_down() -> list[str]:
        return [shard_server(name, len(shards)) for name, ok in metrics.probe_ok.items()
                if not ok]

    server = MetricsServer(lambda: bytes(generate_latest(registry)), shards_down)
    port = await server.start(settings.metrics_host,
                              DEFAULT_PORT if settings.metrics_port is None
                              else settings.metrics_port)
    log.info("serving the fleet's /metrics, /healthz and /readyz", port=port)
    probing = asyncio.create_task(keep_probing(metrics, shards, settings))
    try:
        await probing
    finally:
        await periodic.stop(probing)
        await server.stop()
        for redis in shards.values():
            await redis.aclose()
        provider.shutdown()
