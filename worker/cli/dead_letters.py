"""Runs that stored nothing, and queueing their sessions again: `memfleet runs`, `retry`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from redis.asyncio import Redis

from worker.cli.common import Commands, resolve, with_store
from worker.config import Settings
from worker.outcomes import DEAD_LETTERS, parse_outcomes


def register(commands: Commands) -> None:
    runs = commands.add_parser("runs", help="list dead letters: runs that stored nothing")
    runs.add_argument("--outcome", default=",".join(DEAD_LETTERS),
                      help="comma-separated outcomes (default: every dead-letter outcome)")
    runs.add_argument("--limit", type=int, default=50)
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(handler=cmd_runs)
    retry = commands.add_parser("retry", help="queue a session again after its run failed")
    which = retry.add_mutually_exclusive_group(required=True)
    which.add_argument("--session", help="one session (with --user)")
    retry.add_argument("--user", help="the session's user")
    which.add_argument("--failed", action="store_true",
                       help="every session whose latest run failed")
    retry.set_defaults(handler=cmd_retry)


def cmd_runs(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.dead_letters import describe_run

    outcomes = parse_outcomes(args.outcome)
    settings = resolve(settings)
    runs = asyncio.run(with_store(settings, lambda store: store.runs_by_outcome(
        outcomes, args.limit)))
    rows = [describe_run(run) for run in runs]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        for run in rows:
            print(f"{run['finished_at']}  {run['outcome']:<8} user={run['user_id']}"
                  f" session={run['session_id']}"
                  f" try={run['job_try']}  {run['error'] or ''}")
    return 0


def cmd_retry(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.dead_letters import redrive

    if args.session is not None and args.user is None:
        print("memfleet: error: retry --session needs --user (sessions are per user)",
              file=sys.stderr)
        return 2

    settings = resolve(settings)

    async def go(store: Any) -> Any:
        redis = Redis.from_url(settings.redis_url or "")
        try:
            return await redrive(redis, store, settings.queue_name,
                                 None if args.failed else [(args.user, args.session)])
        finally:
            await redis.aclose()

    results = asyncio.run(with_store(settings, go))
    for result in results:
        print(f"{result.user_id} {result.session_id}: {result.status}")
    return 1 if any(r.status == "no hand-over in Redis" for r in results) else 0
