"""`memfleet exporter` with several Redis shards: one series per shard (label `shard`),
each from its own Redis; a shard that does not answer: `/readyz` names it, its
`memfleet_exporter_probe_success` says 0 and its probe timestamp stops, `/healthz`
(liveness) holds."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import httpx

from tests.helpers import eventually, start_exporter, stop_process, user_msg, worker_env
from tests.shard_servers import aof_servers, shard_map, sharded
from worker.client import ShardedRedis, schedule_memory_persistence
from worker.config import Settings
from worker.embedded import free_port
from worker.protocol.shards import ShardMap


async def test_the_exporter_serves_each_shard_apart(settings: Settings, tmp_path: Path) -> None:
    async with aof_servers(tmp_path, "a", "b") as servers:
        two = sharded(settings, servers)
        shard_map_ = ShardMap.from_settings(two)
        users = [f"user{i}" for i in range(12)]
        on_a = [u for u in users if shard_map_.route(u).home == "a"]
        on_b = [u for u in users if shard_map_.route(u).home == "b"]
        client = ShardedRedis.from_settings(two)
        port = free_port()
        exporter = start_exporter(worker_env(two, redis_shards=shard_map(servers),
                                             metrics_port=str(port),
                                             queue_probe_interval_s="0.2"), tmp_path)
        try:
            for user in on_a[:1] + on_b[:2]:
                await schedule_memory_persistence(client, "s1", user, [user_msg("I use Zig.")])
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                async def scraped() -> bool:
                    try:
                        body = (await http.get("/metrics")).text
                    except httpx.TransportError:
                        return False
                    return ('memfleet_fleet_sessions_waiting{shard="a"} 1.0' in body
                            and 'memfleet_fleet_sessions_waiting{shard="b"} 2.0' in body)

                await eventually(scraped, 30)
                body = (await http.get("/metrics")).text
                assert 'memfleet_queue_depth{shard="a",state="ready"} 1.0' in body
                assert 'memfleet_queue_depth{shard="b",state="ready"} 2.0' in body
                assert 'memfleet_exporter_probe_success{shard="b"} 1.0' in body
                assert (await http.get("/readyz")).status_code == 200
                await asyncio.to_thread(servers["b"].kill)
                async def unready() -> bool:
                    return (await http.get("/readyz")).status_code == 503
                await eventually(unready, 30)
                assert (await http.get("/readyz")).json() == {
                    "status": "unavailable", "down": ["Redis shard b"]}
                assert (await http.get("/healthz")).status_code == 200
                first = probe_times((await http.get("/metrics")).text)
                await asyncio.sleep(1)  # five probe intervals
                body = (await http.get("/metrics")).text
                assert 'memfleet_exporter_probe_success{shard="a"} 1.0' in body
                assert 'memfleet_exporter_probe_success{shard="b"} 0.0' in body
                later = probe_times(body)
                assert later["a"] > first["a"] and later["b"] == first["b"], (first, later)
                assert time.time() - later["b"] >= 1, "b's last success is before the kill"
                await asyncio.to_thread(servers["b"].start)

                async def ready_again() -> bool:
                    return (await http.get("/readyz")).status_code == 200
                await eventually(ready_again, 30)
                body = (await http.get("/metrics")).text
                assert 'memfleet_exporter_probe_success{shard="b"} 1.0' in body
        finally:
            stop_process(exporter)
            await client.aclose()


def probe_times(metrics: str) -> dict[str, float]:
    """Each shard's memfleet_exporter_probe_timestamp_seconds in a scrape."""
    return {shard: float(value) for shard, value in re.findall(
        r'memfleet_exporter_probe_timestamp_seconds\{shard="(\w+)"\} (\S+)', metrics)}
