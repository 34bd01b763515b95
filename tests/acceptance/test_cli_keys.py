"""`memfleet keys` as an operator runs it, as subprocesses against real PostgreSQL: the
key printed once on stdout and never on stderr or by `list`; the key works on the
memory API until revoked; every mistake one `memfleet:` line and exit 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx

from tests.api_server import api_settings, running_api
from tests.helpers import worker_env
from worker.config import Settings

KEY = re.compile(r"^mfk_([0-9a-f]{12})_([0-9a-f]{64})$")


def memfleet(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.cli", "keys", *args],
                          env=worker_env(settings), capture_output=True, text=True,
                          timeout=120, check=False)


def one_line_error(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.startswith(f"memfleet: {says}"), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


async def test_a_key_is_created_shown_once_listed_used_and_revoked(settings: Settings) -> None:
    made = memfleet(settings, "create", "--name", "chat-eu", "--scope", "read,handover")
    assert made.returncode == 0, made.stderr
    match = KEY.match(made.stdout.strip())
    assert match is not None and made.stdout.count("\n") == 1, made.stdout
    key, key_id, secret = match[0], match[1], match[2]
    assert secret not in made.stderr
    assert made.stderr.startswith(f"memfleet: created service key {key_id} (chat-eu; "
                                  "handover,read): the key above is shown this once")
    listed = memfleet(settings, "list")
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    assert line.startswith(f"{key_id}  chat-eu  handover,read  created ")
    assert "last used never" in line and "revoked" not in line and secret not in line
    async with running_api(api_settings(settings)) as base, \
            httpx.AsyncClient(base_url=base, timeout=30) as api:
        headers = {"Authorization": f"Bearer {key}"}
        assert (await api.get("/users/ada/facts", headers=headers)).status_code == 200
        revoked = memfleet(settings, "revoke", key_id)
        assert revoked.returncode == 0, revoked.stderr
        assert revoked.stdout.startswith(f"{key_id} (chat-eu) revoked")
    [entry] = json.loads(memfleet(settings, "list", "--json").stdout)
    assert entry["id"] == key_id and entry["scopes"] == ["handover", "read"]
    assert entry["last_used_at"] is not None and entry["revoked_at"] is not None
    assert secret not in json.dumps(entry)
    again = memfleet(settings, "revoke", key_id)
    assert again.returncode == 0 and "was already revoked at" in again.stdout


async def test_every_mistake_is_one_line_and_exit_2(settings: Settings) -> None:
    one_line_error(memfleet(settings, "revoke", "0123456789ab"), "no service key 0123456789ab")
    one_line_error(memfleet(settings, "revoke", "nope"), "a key id is 12 hex digits")
    one_line_error(memfleet(settings, "revoke"), "keys revoke needs the key's ID")
    one_line_error(memfleet(settings, "create", "--name", "x", "--scope", "read,root"),
                   "--scope takes a comma-separated list of handover, read, admin (not root)")
    one_line_error(memfleet(settings, "create", "--scope", "read"),
                   "keys create needs --name and --scope")
    one_line_error(memfleet(settings, "create", "--name", " ", "--scope", "read"),
                   "--name takes 1 to 100 printable characters")
    one_line_error(memfleet(settings, "list", "--name", "x"), "keys list takes no --name")
    one_line_error(memfleet(settings, "rotate"), "keys: argument action: invalid choice")
    empty = memfleet(settings, "list")
    assert empty.returncode == 0 and empty.stdout == ""
    assert empty.stderr.startswith("memfleet: no service key")
