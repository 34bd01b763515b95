"""Where sessions' memory stopped, and queueing those sessions again: `memfleet runs`,
`retry`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from worker.cli.common import Commands, open_redis, resolve, with_store
from worker.config import Settings
from worker.errors import MemfleetError
from worker.outcomes import DEAD_LETTERS, parse_dead_letter_outcomes

DEFAULT_LIMIT = 50


def register(commands: Commands) -> None:
    runs = commands.add_parser(
        "runs", help="list dead letters: where a session's memory stopped (one per point, "
                     "with its attempts), open ones unless --all")
    runs.add_argument("--outcome", default=",".join(DEAD_LETTERS),
                      help="comma-separated outcomes of a dead letter's latest run: "
                           f"{', '.join(DEAD_LETTERS)} (default: all of them)")
    runs.add_argument("--all", action="store_true",
                      help="the history too: resolved dead letters, and runs that name no "
                           "session, each marked")
    runs.add_argument("--limit", type=int, default=DEFAULT_LIMIT,
                      help=f"at most this many, newest first (a positive integer; default "
                           f"{DEFAULT_LIMIT})")
    runs.add_argument("--json", action="store_true", help="a JSON list instead of lines")
    runs.set_defaults(handler=cmd_runs)
    retry = commands.add_parser("retry", help="queue a session again after its run failed")
    which = retry.add_mutually_exclusive_group(required=True)
    which.add_argument("--session", help="one session (with --user)")
    retry.add_argument("--user", help="the session's user")
    which.add_argument("--failed", action="store_true",
                       help="every session whose open dead letter ended failed")
    retry.set_defaults(handler=cmd_retry)


def cmd_runs(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.dead_letters import describe, line

    outcomes = parse_dead_letter_outcomes(args.outcome)
    if args.limit < 1:
        raise MemfleetError(f"--limit needs a positive integer, not {args.limit}")
    settings = resolve(settings)
    letters = asyncio.run(with_store(settings, lambda store: store.dead_letters(
        outcomes, include_resolved=args.all, limit=args.limit)))
    if args.json:
        print(json.dumps([describe(letter) for letter in letters], ensure_ascii=False,
                         indent=2))
    for letter in [] if args.json else letters:
        print(line(letter))
    if not letters:
        print("memfleet: no dead letter" if args.all else
              "memfleet: no open dead letter (`memfleet runs --all` lists resolved ones)",
              file=sys.stderr)
    return 0


def cmd_retry(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.dead_letters import Redrive, redrive_failed, redrive_session

    if args.session is not None and args.user is None:
        raise MemfleetError("retry --session needs --user (sessions are per user)")
    if args.failed and args.user is not None:
        raise MemfleetError("retry --failed takes no --user: it re-drives every session "
                            "whose open dead letter ended failed")

    settings = resolve(settings)

    async def go(store: Any) -> Any:
        redis = open_redis(settings)
        try:
            if args.failed:
                return await redrive_failed(redis, store, settings.queue_name)
            return [await redrive_session(redis, store, settings.queue_name, args.user,
                                          args.session)]
        finally:
            await redis.aclose()

    results = asyncio.run(with_store(settings, go))
    for result in results:
        print(f"{result.user_id} {result.session_id}: {result.status}")
    if not results:
        print("memfleet: no open dead letter ended failed: nothing to retry", file=sys.stderr)
    return 1 if any(r.status is Redrive.GONE for r in results) else 0
