"""Service keys of chat servers: `memfleet keys create`, `list`, `revoke`
(worker.store.service_keys; docs/api.md says what each scope allows)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from worker.cli.common import Commands, resolve
from worker.config import Settings
from worker.errors import MemfleetError


def register(commands: Commands) -> None:
    keys = commands.add_parser(
        "keys", help="service keys for chat servers: create (shown once), list, revoke")
    keys.add_argument("action", choices=["create", "list", "revoke"],
                      help="create a key (printed once, on stdout, never again; needs --name "
                           "and --scope); list every key (never a secret); revoke ID (every "
                           "API process refuses it within seconds)")
    keys.add_argument("key_id", metavar="ID", nargs="?",
                      help="revoke: the key's id, as `memfleet keys list` shows it")
    keys.add_argument("--name", help="create: what the key is for (1-100 characters)")
    keys.add_argument("--scope",
                      help="create: comma-separated scopes: handover, read, admin (handover: "
                           "hand turns over; read: read any user's memory; admin: change, "
                           "export and erase any user's memory)")
    keys.add_argument("--json", action="store_true", help="list: a JSON list instead of lines")
    keys.set_defaults(handler=cmd_keys)


def cmd_keys(settings: Settings, args: argparse.Namespace) -> int:
    if args.key_id is not None and args.action != "revoke":
        raise MemfleetError(f"keys {args.action} takes no ID (only `keys revoke ID` does)")
    if args.action != "create" and (args.name is not None or args.scope is not None):
        raise MemfleetError(f"keys {args.action} takes no --name or --scope (only `keys "
                            "create` does)")
    if args.json and args.action != "list":
        raise MemfleetError(f"keys {args.action} takes no --json (only `keys list` does)")
    if args.action == "create":
        return cmd_create(settings, args)
    if args.action == "list":
        return cmd_list(settings, args)
    return cmd_revoke(settings, args)


def _with_keys(settings: Settings, use: Any) -> Any:
    from worker.store.service_keys import ServiceKeyStore

    async def go() -> Any:
        store = await ServiceKeyStore.connect(settings.database_url or "")
        try:
            return await use(store)
        finally:
            await store.aclose()

    return asyncio.run(go())


def _when(moment: Any) -> str:
    return "never" if moment is None else moment.isoformat(timespec="seconds")


def cmd_create(settings: Settings, args: argparse.Namespace) -> int:
    from worker.store.service_keys import valid_name, valid_scopes

    if args.name is None or args.scope is None:
        raise MemfleetError("keys create needs --name and --scope")
    name, scopes = valid_name(args.name), valid_scopes(args.scope)
    settings = resolve(settings)
    row, key = _with_keys(settings, lambda store: store.create(name, scopes))
    print(key, flush=True)
    print(f"memfleet: created service key {row.id} ({row.name}; {','.join(row.scopes)}): "
          "the key above is shown this once; keep it in the chat server's secrets",
          file=sys.stderr)
    return 0


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    settings = resolve(settings)
    rows = _with_keys(settings, lambda store: store.list())
    if args.json:
        print(json.dumps([{"id": r.id, "name": r.name, "scopes": list(r.scopes),
                           "created_at": r.created_at.isoformat(),
                           "last_used_at": r.last_used_at and r.last_used_at.isoformat(),
                           "revoked_at": r.revoked_at and r.revoked_at.isoformat()}
                          for r in rows], ensure_ascii=False, indent=2))
    for r in [] if args.json else rows:
        revoked = f"  revoked {_when(r.revoked_at)}" if r.revoked_at else ""
        print(f"{r.id}  {r.name}  {','.join(r.scopes)}  created {_when(r.created_at)}"
              f"  last used {_when(r.last_used_at)}{revoked}")
    if not rows:
        print("memfleet: no service key (`memfleet keys create` makes one)", file=sys.stderr)
    return 0


def cmd_revoke(settings: Settings, args: argparse.Namespace) -> int:
    from worker.store.service_keys import valid_key_id

    if args.key_id is None:
        raise MemfleetError("keys revoke needs the key's ID (`memfleet keys list` shows it)")
    key_id = valid_key_id(args.key_id)
    settings = resolve(settings)
    revoked = _with_keys(settings, lambda store: store.revoke(key_id))
    if revoked is None:
        raise MemfleetError(f"no service key {key_id} (`memfleet keys list` shows them)")
    row, already = revoked
    if already:
        print(f"{row.id} ({row.name}) was already revoked at {_when(row.revoked_at)}")
    else:
        print(f"{row.id} ({row.name}) revoked: every API process refuses it within "
              "a few seconds")
    return 0
