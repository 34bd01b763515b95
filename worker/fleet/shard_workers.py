"""One process serving several Redis shards (worker.protocol.shards): one ARQ worker each.

ARQ's Worker takes one Redis and one queue, so a process that serves N shards
runs N of them on one event loop, each with its own Redis connection, job slots
(MEMFLEET_MAX_JOBS per shard), heartbeat, recovery pass and PostgreSQL pool
(MEMFLEET_DB_POOL_MAX per shard): a shard's outage stalls only that shard's
worker, and its recovery pass finds only its own shard's dead sessions. One
process per shard (``memfleet worker --shard a``) is the same with N = 1:
docs/operations.md, "Several Redis", says when to choose which.

SIGTERM and SIGINT reach every worker: each stops taking jobs and lets its
running ones finish, as one worker does.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

from worker.config import Settings
from worker.errors import ConfigurationError
from worker.fleet.app import build_worker
from worker.protocol.arq_worker import Worker
from worker.telemetry import Telemetry


def shard_settings(settings: Settings, shard: str) -> Settings:
    """The settings of the worker that serves ``shard``: its URL as the one Redis."""
    urls = dict(settings.redis_shard_entries)
    if shard not in urls:
        raise ConfigurationError(f"--shard {shard}: no such shard in MEMFLEET_REDIS_SHARDS "
                                 f"(shards: {', '.join(urls) or 'none'})")
    return settings.model_copy(update={"redis_url": urls[shard]})


def build_shard_workers(
    settings: Settings, shards: list[str], *, burst: bool = False,
    telemetry: Telemetry | None = None, tune_gc: bool = False, **overrides: Any,
) -> list[Worker]:
    """One ARQ worker per shard named; only the first serves /metrics (one port)."""
    workers = []
    for index, shard in enumerate(dict.fromkeys(shards)):
        one = shard_settings(settings, shard)
        if index:
            one = one.model_copy(update={"metrics_port": None})
        workers.append(build_worker(one, burst=burst, telemetry=telemetry,
                                    tune_gc=tune_gc and index == 0,
                                    handle_signals=False, **overrides))
    return workers


async def run_all(workers: list[Worker], *, burst: bool = False) -> None:
    """Run the workers until each ends (a burst: its queue is empty; else a signal)."""
    loop = asyncio.get_running_loop()

    def stop(signum: signal.Signals) -> None:
        for worker in workers:
            worker.handle_sig_wait_for_completion(signum)

    if not burst:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop, signum)
    for worker in workers:
        worker.main_task = loop.create_task(worker.main())
    tasks = [worker.main_task for worker in workers if worker.main_task]
    try:
        # One shard's worker failing (its Redis gone past MEMFLEET_REDIS_RETRIES) ends
        # the process, as a single worker's would: the orchestrator restarts it.
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = [task for task in done if not task.cancelled() and task.exception()]
        if failed:
            for worker in workers:
                worker.handle_sig(signal.SIGTERM)
            await asyncio.gather(*tasks, return_exceptions=True)
            raise failed[0].exception()  # type: ignore[misc]
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        if not burst:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        for worker in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker.close()


async def drain_shards(settings: Settings, shards: list[str] | None = None,
                       **overrides: Any) -> list[Worker]:
    """Burst workers over the shards named (default: every shard) until each queue is empty."""
    names = shards or [name for name, _ in settings.redis_shard_entries]
    workers = build_shard_workers(settings, names, burst=True, poll_delay=0, **overrides)
    await run_all(workers, burst=True)
    return workers
