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


def register(commands: Commands) -> None:
    shards = commands.add_parser("shards", help="the Redis shard map: list it, route a user, "
                                                "check a shard being added has drained")
    actions = shards.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="each shard's name, state and host")
    listing.set_defaults(handler=cmd_list)
    route = actions.add_parser("route", help="the shard a user's hand-overs go to")
    route.add_argument("--user", required=True, help="the user's id")
    route.set_defaults(handler=cmd_route)
    drain = actions.add_parser(
        "drain", help="moving users still holding unfinished lists on their old shard "
                      "(0 everywhere: the joining shard may be settled)")
    drain.add_argument("--wait", type=float, metavar="SECONDS", default=0.0,
                       help="look again every 2 s until none is left, at most this long")
    drain.set_defaults(handler=cmd_drain)


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
