"""`memfleet shards`: the Redis shard map (worker.protocol.shards), a user's shard, and
whether a shard being added can be settled (docs/operations.md, "Adding a shard")."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from worker.cli.common import Commands
from worker.config import Settings
from worker.errors import MemfleetError

ACTIONS = ("list", "route", "drain")


def register(commands: Commands) -> None:
    shards = commands.add_parser("shards", help="the Redis shard map: list it, route a user, "
                                                "check a shard being added has drained")
    shards.add_argument("action", choices=ACTIONS,
                        help="list: each shard's name, state and host; route: the shard of "
                             "--user; drain: moving users still holding unfinished lists on "
                             "their old shard (none left: the joining shard may be settled)")
    shards.add_argument("--user", help="the user's id (route)")
    shards.add_argument("--wait", type=float, metavar="SECONDS", default=0.0,
                        help="drain: look again every 2 s until none is left, at most this "
                             "long")
    shards.set_defaults(handler=cmd_shards)


def cmd_shards(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "route" and not args.user:
        raise MemfleetError("shards route needs --user")
    handler = {"list": cmd_list, "route": cmd_route, "drain": cmd_drain}[args.action]
    return handler(settings, args)


def _map(settings: Settings) -> Any:
    from worker.protocol.shards import ShardMap

    if not settings.redis_shard_entries:
        raise MemfleetError("no Redis set: MEMFLEET_REDIS_SHARDS or MEMFLEET_REDIS_URL")
    return ShardMap.from_settings(settings)


def _state(shard_map: Any, name: str) -> str:
    return ("pending" if name in shard_map.pending else
            "joining" if name in shard_map.joining else "settled")


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    from worker.server_address import address

    shard_map = _map(settings)
    for name, url in settings.redis_shard_entries:
        # The host alone: the URL may carry a password.
        print(f"{name}\t{_state(shard_map, name)}\t{address(url)}")
    return 0


def cmd_route(settings: Settings, args: argparse.Namespace) -> int:
    route = _map(settings).route(args.user)
    print(json.dumps({"shard": route.home, "moving_to": route.target if route.moving else None,
                      "mode": route.mode}))
    return 0


def cmd_drain(settings: Settings, args: argparse.Namespace) -> int:
    from worker.ops.shard_moves import moving_left
    from worker.protocol.shards import ShardedRedis

    shard_map = _map(settings)
    if not shard_map.joining:
        raise MemfleetError("no shard is joining: name the new shard in "
                            "MEMFLEET_REDIS_SHARDS_JOINING first (docs/operations.md, "
                            "\"Adding a shard\")")

    async def go() -> int:
        redis = ShardedRedis.from_settings(settings)
        deadline = time.monotonic() + args.wait
        try:
            while True:
                left = await moving_left(redis)
                users = sum(entry.users for entry in left)
                if users == 0 or time.monotonic() >= deadline:
                    break
                await asyncio.sleep(2.0)
        finally:
            await redis.aclose()
        for entry in left:
            print(f"{entry.shard}\tmoving users left {entry.users}\tsessions {entry.sessions}")
        if users:
            print("memfleet: moving users still hold unfinished lists on their old shard: "
                  "keep the joining map deployed", file=sys.stderr)
            return 1
        print("memfleet: nothing left to drain: deploy the map with the joining shard "
              "settled (MEMFLEET_REDIS_SHARDS_JOINING unset)", file=sys.stderr)
        return 0

    return asyncio.run(go())
