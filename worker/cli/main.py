"""memfleet's command line: the fleet's commands here (up, down, migrate, worker, exporter,
webhook, enqueue, demo), those on users' memory in worker.cli.memory.

Settings are read here, once, and passed down. With no MEMFLEET_DATABASE_URL or
MEMFLEET_REDIS_URL, the embedded servers under MEMFLEET_HOME_DIR (.memfleet/)
are started or reused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from redis.asyncio import Redis

from worker.cli.common import resolve
from worker.cli.memory import COMMANDS as MEMORY_COMMANDS
from worker.config import Settings, settings_error
from worker.errors import MemfleetError
from worker.memory_rules import MEMORY_SCOPES


def _cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    settings = resolve(settings)
    print(f"MEMFLEET_DATABASE_URL={settings.database_url}")
    print(f"MEMFLEET_REDIS_URL={settings.redis_url}")
    return 0


def _cmd_down(settings: Settings, args: argparse.Namespace) -> int:
    from worker.embedded import stop_embedded

    stop_embedded(settings.home_dir.resolve())
    print("embedded servers stopped")
    return 0


def _cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    from worker.store.migrate import migrate

    settings = resolve(settings)
    applied = asyncio.run(migrate(settings.database_url or "", embed_dim=settings.embed_dim))
    print("applied: " + ", ".join(applied) if applied else "schema is up to date")
    return 0


def _cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    from worker.fleet.app import build_worker, new_event_loop
    from worker.ops.preflight import check_servers
    from worker.telemetry import configure_logging, setup_telemetry

    configure_logging(args.log_level, http_requests=settings.log_http_requests)
    settings = resolve(settings)
    asyncio.run(check_servers(settings))
    telemetry = setup_telemetry(settings)
    # ARQ's Worker runs on the current loop: make it ours before building it.
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        build_worker(settings, burst=args.burst, telemetry=telemetry, tune_gc=True).run()
    finally:
        telemetry.shutdown()
        asyncio.set_event_loop(None)
        loop.close()
    return 0


def _cmd_exporter(settings: Settings, args: argparse.Namespace) -> int:
    from worker.fleet.metrics_exporter import run_exporter
    from worker.ops.preflight import check_redis
    from worker.telemetry import configure_logging

    configure_logging(args.log_level, http_requests=settings.log_http_requests)
    settings = resolve(settings, database=False)
    asyncio.run(check_redis(settings))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_exporter(settings))
    return 0


def _cmd_webhook(settings: Settings, args: argparse.Namespace) -> int:
    from worker.config import secret
    from worker.fleet.webhook import deliver_forever, webhook_target
    from worker.ops.preflight import check_redis
    from worker.protocol import queue
    from worker.telemetry import configure_logging

    url = args.url or settings.webhook_url
    if not url:
        raise MemfleetError("memfleet webhook needs --url or MEMFLEET_WEBHOOK_URL")
    # Checked before any server is started: a URL or a secret that cannot work fails now.
    target = webhook_target(url, secret(settings.webhook_secret),
                            unsigned=args.unsigned or settings.webhook_unsigned)
    configure_logging(args.log_level, http_requests=settings.log_http_requests)
    settings = resolve(settings, database=False)
    asyncio.run(check_redis(settings))

    async def go() -> None:
        redis = Redis.from_url(settings.redis_url or "")
        try:
            await deliver_forever(redis, queue.events_key(settings.queue_name), target,
                                  consumer=args.consumer, start="0" if args.from_start else "$")
        finally:
            await redis.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(go())
    return 0


async def _enqueue(settings: Settings, session: str, user: str, messages: Any,
                   agent: str | None) -> str:
    from worker.client.handover import schedule_memory_persistence
    from worker.memory_rules import Limits

    redis = Redis.from_url(settings.redis_url or "")
    try:
        result = await schedule_memory_persistence(
            redis, session, user, messages, limits=Limits.from_settings(settings),
            queue_name=settings.queue_name, agent_id=agent,
        )
    finally:
        await redis.aclose()
    return result.job_id or "coalesced into the job already queued"


def _cmd_enqueue(settings: Settings, args: argparse.Namespace) -> int:
    try:
        raw = Path(args.messages).read_bytes()
        messages = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise MemfleetError(f"{args.messages} is not valid UTF-8") from None
    except (OSError, ValueError) as exc:
        raise MemfleetError(f"cannot read {args.messages}: {exc}") from None
    settings = resolve(settings)
    print(asyncio.run(_enqueue(settings, args.session, args.user, messages, args.agent)))
    return 0


def _cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.demo import run_demo

    return asyncio.run(run_demo(resolve(settings)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memfleet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start the embedded servers and print their URLs")
    sub.add_parser("down", help="stop the embedded servers")
    sub.add_parser("migrate", help="apply schema/ (safe with many replicas at once)")
    worker = sub.add_parser("worker", help="run a worker")
    worker.add_argument("--burst", action="store_true", help="drain the queue and exit")
    worker.add_argument("--log-level", default="INFO")
    exporter = sub.add_parser("exporter", help="serve the fleet's queue, lag and worker "
                                               "gauges on /metrics (one per fleet)")
    exporter.add_argument("--log-level", default="INFO")
    webhook = sub.add_parser("webhook", help="POST every commit event to a URL, at least "
                                             "once (no personal data in the events)")
    webhook.add_argument("--url", help="the receiver (default: MEMFLEET_WEBHOOK_URL)")
    webhook.add_argument("--consumer", help="this sender's stable name (default: the host)")
    webhook.add_argument("--from-start", action="store_true",
                         help="a new sender starts from the oldest event kept, not from now")
    webhook.add_argument("--unsigned", action="store_true",
                         help="send deliveries unsigned (default: MEMFLEET_WEBHOOK_SECRET "
                              "is required; MEMFLEET_WEBHOOK_UNSIGNED=true does the same)")
    webhook.add_argument("--log-level", default="INFO")
    enqueue = sub.add_parser("enqueue", help="hand a session over, as a chat server would")
    enqueue.add_argument("--session", required=True)
    enqueue.add_argument("--user", required=True)
    enqueue.add_argument("--messages", required=True, help="JSON file: [{role, content}, ...]")
    enqueue.add_argument("--agent", help="the persona or agent instance of the session")
    facts = sub.add_parser("facts", help="print a user's facts")
    facts.add_argument("--user", required=True)
    facts.add_argument("--json", action="store_true")
    facts.add_argument("--all", action="store_true", help="include superseded facts")
    facts.add_argument("--scope", choices=MEMORY_SCOPES,
                       help="profile, the agent's relationship facts, both, none, or all"
                            " (default: both with --agent, else all)")
    facts.add_argument("--agent", help="the agent whose relationship facts are read")
    facts.add_argument("--valid-at", metavar="ISO", help="the facts true then, by what is "
                                                         "known now")
    facts.add_argument("--known-at", metavar="ISO", help="the facts memfleet believed then")
    runs = sub.add_parser("runs", help="list dead letters: runs that stored nothing")
    runs.add_argument("--outcome", default="failed,skipped,invalid,error",
                      help="comma-separated outcomes (default: every dead-letter outcome)")
    runs.add_argument("--limit", type=int, default=50)
    runs.add_argument("--json", action="store_true")
    retry = sub.add_parser("retry", help="queue a session again after its run failed")
    which = retry.add_mutually_exclusive_group(required=True)
    which.add_argument("--session", help="one session (with --user)")
    retry.add_argument("--user", help="the session's user")
    which.add_argument("--failed", action="store_true",
                       help="every session whose latest run failed")
    export = sub.add_parser("export", help="everything held about a user, as JSON (right "
                                           "of access)")
    export.add_argument("--user", required=True)
    importer = sub.add_parser("import", help="write facts from a JSONL file, or pass old "
                                             "memory blobs through extraction (idempotent)")
    source = importer.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", help="JSONL: one fact a line ({user_id, text, ...})")
    source.add_argument("--legacy", help="JSONL: one old free-text memory a line "
                                         "({user_id, text, id})")
    sub.add_parser("expire", help="supersede the facts whose expires_at has come "
                                  "(workers also do it every MEMFLEET_EXPIRY_INTERVAL_S)")
    consent = sub.add_parser("consent", help="a user's memory: show, enable, disable, "
                                             "forget (disable and erase), erase")
    consent.add_argument("action", choices=["show", "enable", "disable", "forget", "erase"])
    consent.add_argument("--user", required=True)
    reembed = sub.add_parser("reembed", help="move every active fact to another embedding "
                                             "model and dimension, while workers run")
    reembed.add_argument("--model", required=True, help="the embeddings model moved to")
    reembed.add_argument("--dim", type=int, required=True, help="its dimension")
    reembed.add_argument("--batch", type=int, default=128, help="texts per embeddings call")
    sub.add_parser("demo", help="run the end-to-end demo")
    return parser


_COMMANDS = {
    "up": _cmd_up, "down": _cmd_down, "migrate": _cmd_migrate, "worker": _cmd_worker,
    "exporter": _cmd_exporter, "webhook": _cmd_webhook, "enqueue": _cmd_enqueue,
    "demo": _cmd_demo, **MEMORY_COMMANDS,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings()
        return _COMMANDS[args.command](settings, args)
    except ValidationError as exc:
        print(f"memfleet: {settings_error(exc)}", file=sys.stderr)
    except MemfleetError as exc:
        print(f"memfleet: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
