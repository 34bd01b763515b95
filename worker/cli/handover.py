"""A hand-over by hand, as a chat server would make it: `memfleet enqueue`."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from worker.cli.common import Commands, open_redis, resolve
from worker.config import Settings
from worker.errors import MemfleetError


def register(commands: Commands) -> None:
    enqueue = commands.add_parser("enqueue", help="hand a session over, as a chat server would")
    enqueue.add_argument("--session", required=True, help="the session's id (unique per user)")
    enqueue.add_argument("--user", required=True, help="the user's id")
    enqueue.add_argument("--messages", required=True, help="JSON file: [{role, content}, ...]")
    enqueue.add_argument("--agent", help="the persona or agent instance of the session")
    enqueue.set_defaults(handler=cmd_enqueue)


async def _enqueue(settings: Settings, session: str, user: str, messages: Any,
                   agent: str | None) -> int:
    from worker.client.handover import schedule_memory_persistence
    from worker.memory_rules import Limits
    from worker.ops.preflight import check_redis

    # Redis unreachable: said by the check, naming the server (the hand-over's own
    # error names no server, as it is meant for chat servers' logs).
    await check_redis(settings)
    redis = open_redis(settings)
    try:
        result = await schedule_memory_persistence(
            redis, session, user, messages, limits=Limits.from_settings(settings),
            queue_name=settings.queue_name, agent_id=agent,
        )
    finally:
        await redis.aclose()
    # The hand-over's id, what README and docs/handover.md call it (wait_for_memory
    # takes it); whether a job was queued for it or one already queued will read it.
    return result.handover_id


def cmd_enqueue(settings: Settings, args: argparse.Namespace) -> int:
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
