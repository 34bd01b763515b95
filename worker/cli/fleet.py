"""The fleet's long-running processes: `memfleet worker`, `exporter` and `webhook`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from redis.asyncio import Redis

from worker.cli.common import Commands, add_log_level, resolve
from worker.config import Settings
from worker.errors import MemfleetError


def register(commands: Commands) -> None:
    worker = commands.add_parser("worker", help="run a worker")
    worker.add_argument("--burst", action="store_true", help="drain the queue and exit")
    worker.add_argument("--shard", action="append", metavar="NAME",
                        help="serve this shard of MEMFLEET_REDIS_SHARDS (repeatable; "
                             "default: every shard)")
    add_log_level(worker)
    worker.set_defaults(handler=cmd_worker)
    exporter = commands.add_parser("exporter", help="serve the fleet's queue, lag and worker "
                                                    "gauges on /metrics (one per fleet)")
    add_log_level(exporter)
    exporter.set_defaults(handler=cmd_exporter)
    webhook = commands.add_parser("webhook", help="POST every commit event to a URL, at least "
                                                  "once (no personal data in the events)")
    webhook.add_argument("--url", help="the receiver (default: MEMFLEET_WEBHOOK_URL)")
    webhook.add_argument("--consumer", help="this sender's stable name (default: the host)")
    webhook.add_argument("--from-start", action="store_true",
                         help="send every event kept again, from the oldest (the group's "
                              "position moves back, for every sender of the fleet; a one-off: "
                              "leave it out of the service's command line)")
    webhook.add_argument("--from-event", metavar="ID",
                         help="send every event from event ID on again (the id in the body, "
                              "as the receiver got it), like --from-start")
    webhook.add_argument("--shard", metavar="NAME",
                         help="with MEMFLEET_REDIS_SHARDS: the shard whose events this sender "
                              "delivers (one sender per shard; required with several)")
    webhook.add_argument("--unsigned", action="store_true",
                         help="send deliveries unsigned (default: MEMFLEET_WEBHOOK_SECRET "
                              "is required; MEMFLEET_WEBHOOK_UNSIGNED=true does the same)")
    add_log_level(webhook)
    webhook.set_defaults(handler=cmd_webhook)


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    from worker.fleet.app import build_worker, new_event_loop
    from worker.ops.preflight import check_servers
    from worker.telemetry import configure_logging, setup_telemetry

    names = [name for name, _ in settings.redis_shard_entries]
    if args.shard and not settings.redis_shards:
        raise MemfleetError("--shard needs MEMFLEET_REDIS_SHARDS (with MEMFLEET_REDIS_URL "
                            "alone there is one shard, and every worker serves it)")
    unknown = [name for name in args.shard or () if name not in names]
    if unknown:
        raise MemfleetError(f"--shard {unknown[0]}: no such shard in MEMFLEET_REDIS_SHARDS "
                            f"(shards: {', '.join(names)})")
    configure_logging(args.log_level, http_requests=settings.log_http_requests)
    settings = resolve(settings)
    asyncio.run(check_servers(settings))
    telemetry = setup_telemetry(settings)
    # ARQ's Worker runs on the current loop: make it ours before building it.
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        if settings.redis_shards:
            from worker.fleet.shard_workers import build_shard_workers, run_all

            workers = build_shard_workers(settings, args.shard or names, burst=args.burst,
                                          telemetry=telemetry, tune_gc=True)
            loop.run_until_complete(run_all(workers, burst=args.burst))
        else:
            build_worker(settings, burst=args.burst, telemetry=telemetry, tune_gc=True).run()
    finally:
        telemetry.shutdown()
        asyncio.set_event_loop(None)
        loop.close()
    return 0


def cmd_exporter(settings: Settings, args: argparse.Namespace) -> int:
    from worker.fleet.metrics_exporter import run_exporter
    from worker.ops.preflight import check_redis
    from worker.telemetry import configure_logging

    configure_logging(args.log_level, http_requests=settings.log_http_requests)
    settings = resolve(settings, database=False)
    asyncio.run(check_redis(settings))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_exporter(settings))
    return 0


def cmd_webhook(settings: Settings, args: argparse.Namespace) -> int:
    from worker.config import secret
    from worker.fleet.webhook import deliver_forever, webhook_target
    from worker.fleet.webhook_start import place_group, receiver_host_warning, replay_of, start_line
    from worker.ops.preflight import check_redis
    from worker.protocol import keys
    from worker.telemetry import configure_logging

    url = args.url or settings.webhook_url
    if not url:
        raise MemfleetError("memfleet webhook needs --url or MEMFLEET_WEBHOOK_URL")
    # Each shard has its own events stream: one sender per shard.
    shards = dict(settings.redis_shard_entries) if settings.redis_shards else {}
    if args.shard is not None and args.shard not in shards:
        raise MemfleetError(f"--shard {args.shard}: no such shard in MEMFLEET_REDIS_SHARDS"
                            + (f" (shards: {', '.join(shards)})" if shards else ""))
    if len(shards) > 1 and args.shard is None:
        raise MemfleetError("with several Redis shards, memfleet webhook needs --shard NAME "
                            "(one sender per shard: " + ", ".join(shards) + ")")
    if args.shard is not None:
        settings = settings.model_copy(update={"redis_url": shards[args.shard],
                                               "redis_shards": None})
    # Checked before any server is started: a URL, a secret, a host name or a start
    # that cannot work fails now.
    replay = replay_of(args.from_start, args.from_event)
    target = webhook_target(url, secret(settings.webhook_secret),
                            unsigned=args.unsigned or settings.webhook_unsigned)
    host_warning = receiver_host_warning(target.url)
    if host_warning:
        print(host_warning, file=sys.stderr, flush=True)
    configure_logging(args.log_level, http_requests=settings.log_http_requests)
    settings = resolve(settings, database=False)
    asyncio.run(check_redis(settings))

    async def go() -> None:
        redis = Redis.from_url(settings.redis_url or "")
        events_key = keys.events_key(settings.queue_name)
        try:
            where = await place_group(redis, events_key, replay)
            print(start_line(target, where), file=sys.stderr, flush=True)
            await deliver_forever(redis, events_key, target, consumer=args.consumer,
                                  redis_url=settings.redis_url)
        finally:
            await redis.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(go())
    return 0
