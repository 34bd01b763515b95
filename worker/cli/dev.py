"""Trying memfleet on one machine: `memfleet dev` (everything, one command) and
`memfleet token` (a user's token or panel link, for development).

`memfleet dev` makes or starts the embedded servers, applies the schema, runs one worker
and the memory API as child processes (their logs in files under the home), creates a
service key and prints what to paste; Ctrl-C stops the children, revokes the key and
stops the servers it started. The servers' data stays (`memfleet up` and `down` as ever).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.cli import api as api_command
from worker.cli.common import Commands, resolve
from worker.errors import ConfigurationError, MemfleetError

if TYPE_CHECKING:
    from worker.api.settings import ApiSettings

DEV_DESCRIPTION = """Run memfleet on this machine to try it: the embedded PostgreSQL and Redis
(made and started under MEMFLEET_HOME_DIR where no URL is set), the schema, a worker and
the memory API, a service key for them, and what to paste to use it all. Ctrl-C stops
the worker and the API, revokes the key and stops the servers it started. For
development only: the JWT key is kept in a file under the home unless
MEMFLEET_JWT_SECRET is set."""
MINTING_DESCRIPTION = """Mint an end user's token for the memory API (and, with --panel, the
link that opens their memory panel), signed with MEMFLEET_JWT_SECRET or --secret-file:
for development and tests; a chat server mints its own (docs/api.md, "Minting a token")."""

DEMO_USER = "ada"
DEV_KEY_SCOPES = "handover,read,admin"
PANEL_TTL_S = 3600
READY_TIMEOUT_S = 90.0  # a first start imports everything and checks the schema
STOP_TIMEOUT_S = 20.0  # a worker finishes its job in hand on SIGTERM (then SIGKILL)


def register(commands: Commands) -> None:
    dev = commands.add_parser("dev", help="run it all on this machine to try it: servers, "
                                          "schema, a worker, the memory API, a key",
                              description=DEV_DESCRIPTION)
    dev.add_argument("--host", default="127.0.0.1",
                     help="the memory API's address (default: %(default)s)")
    dev.add_argument("--port", type=int, default=8088,
                     help="the memory API's port (default: %(default)s)")
    dev.add_argument("--user", default=DEMO_USER,
                     help="the user of the printed curl lines and panel link "
                          "(default: %(default)s)")
    dev.set_defaults(handler=cmd_dev, read_settings=api_command.read_api_settings)
    token = commands.add_parser("token", help="mint a user's token or panel link (for "
                                              "development)", description=MINTING_DESCRIPTION)
    token.add_argument("--user", required=True, help="the user the token speaks for")
    token.add_argument("--ttl", type=float, default=900, metavar="SECONDS",
                       help="how long the token lives (default: %(default)s; at most "
                            "MEMFLEET_JWT_MAX_LIFETIME_S)")
    token.add_argument("--panel", action="store_true",
                       help="print the memory panel's link with the token, not the token")
    token.add_argument("--api-url", default="http://127.0.0.1:8088",
                       help="--panel: where the memory API answers (default: %(default)s)")
    token.add_argument("--secret-file", type=Path, metavar="FILE",
                       help="read the JWT key from FILE (as `memfleet dev` keeps it) "
                            "instead of MEMFLEET_JWT_SECRET")
    token.set_defaults(handler=cmd_token, read_settings=api_command.read_api_settings)


# --- memfleet token -----------------------------------------------------------------

def cmd_token(settings: ApiSettings, args: argparse.Namespace) -> int:
    secret = _explicit_secret(settings, args.secret_file)
    if not 0 < args.ttl <= settings.jwt_max_lifetime_s:
        raise MemfleetError(f"--ttl must be over 0 and at most MEMFLEET_JWT_MAX_LIFETIME_S "
                            f"({settings.jwt_max_lifetime_s:g} s)")
    token = _mint(settings, secret, args.user, args.ttl)
    print(panel_link(args.api_url, token) if args.panel else token)
    return 0


def _explicit_secret(settings: ApiSettings, secret_file: Path | None) -> str:
    """The key given on purpose: a token is never signed with a key made up here."""
    if secret_file is not None:
        try:
            return secret_file.read_text("utf-8").strip()
        except OSError as exc:
            raise MemfleetError(f"--secret-file {secret_file}: cannot read it "
                                f"({exc.strerror or type(exc).__name__})") from None
    if settings.jwt_secret is None:
        raise MemfleetError("token needs the memory API's key: set MEMFLEET_JWT_SECRET or "
                            "pass --secret-file (`memfleet dev` prints its own)")
    return settings.jwt_secret.get_secret_value()


def _mint(settings: ApiSettings, secret: str, user_id: str, ttl_s: float) -> str:
    from pydantic import SecretStr

    try:
        from worker.api.auth import AuthConfig, issue_token
        from worker.api.fields import valid_id
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"`memfleet token` needs the api extra ({exc.name} is "
                                 "missing): pip install 'memfleet[api]'") from exc
    try:
        user = valid_id(user_id)
    except ValueError as exc:
        raise MemfleetError(f"--user: {exc}") from None
    config = AuthConfig.from_settings(settings.model_copy(
        update={"jwt_secret": SecretStr(secret)}))  # checks its length as the API does
    return issue_token(config, user, ttl_s=ttl_s)


def panel_link(api_url: str, token: str) -> str:
    # In the fragment: a browser never sends it to a server or puts it in a Referer.
    return f"{api_url.rstrip('/')}/panel#token={token}"


# --- memfleet dev -------------------------------------------------------------------

def cmd_dev(settings: ApiSettings, args: argparse.Namespace) -> int:
    from worker.embedded import embedded_running, stop_embedded
    from worker.store.migrate import migrate

    home = settings.home_dir.resolve()
    # The embedded servers this dev starts (used, and not running before): those it stops.
    started_here = [server for server, used in (("postgres", not settings.database_url),
                                                 ("redis", not settings.redis_url))
                    if used and not embedded_running(home, postgres=server == "postgres",
                                                     redis=server == "redis")]
    settings = resolve(settings, create=True)
    secret_file = _jwt_secret_file(settings, home)
    secret = _explicit_secret(settings, secret_file)
    dev_dir = home / "dev"
    dev_dir.mkdir(parents=True, exist_ok=True)
    children: list[Child] = []
    key_id: str | None = None
    try:
        asyncio.run(migrate(settings.database_url or "", embed_dim=settings.embed_dim,
                            pg_partitions=settings.pg_partitions))
        key_id, key = _create_key(settings)
        env = _child_env(settings, secret)
        children = [Child.spawn("worker", ["worker"], env, dev_dir),
                    Child.spawn("memory API", ["api", "--host", args.host,
                                               "--port", str(args.port)], env, dev_dir)]
        api_url = f"http://{args.host}:{args.port}"
        _wait_ready(settings, api_url, children)
        token = _mint(settings, secret, args.user, PANEL_TTL_S)
        print(_paste(api_url, key, args.user, panel_link(api_url, token), secret_file,
                     dev_dir), flush=True)
        return _run_until_stopped(children)
    except KeyboardInterrupt:  # Ctrl-C while starting: stopped as after it
        return 0
    finally:
        for child in children:
            child.stop()
        if key_id is not None:
            _revoke_key(settings, key_id)
        if started_here:
            stop_embedded(home, postgres="postgres" in started_here,
                          redis="redis" in started_here)
            print("memfleet: dev stopped: the worker, the memory API and the embedded "
                  "servers it started (their data is kept)", file=sys.stderr, flush=True)
        elif children:
            print("memfleet: dev stopped: the worker and the memory API", file=sys.stderr,
                  flush=True)


def _jwt_secret_file(settings: ApiSettings, home: Path) -> Path | None:
    """MEMFLEET_JWT_SECRET when set; else a random key kept in a file of the home (made
    once, owner-only), so that links minted for a dev run work in the next one."""
    if settings.jwt_secret is not None:
        return None
    path = home / "dev" / "jwt-secret"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
    return path


def _create_key(settings: ApiSettings) -> tuple[str, str]:
    from worker.store.service_keys import ServiceKeyStore, valid_name, valid_scopes

    async def create() -> tuple[str, str]:
        store = await ServiceKeyStore.connect(settings.database_url or "")
        try:
            row, key = await store.create(valid_name(f"memfleet dev {os.getpid()}"),
                                          valid_scopes(DEV_KEY_SCOPES))
            return row.id, key
        finally:
            await store.aclose()

    return asyncio.run(create())


def _revoke_key(settings: ApiSettings, key_id: str) -> None:
    from worker.store.service_keys import ServiceKeyStore

    async def revoke() -> None:
        store = await ServiceKeyStore.connect(settings.database_url or "")
        try:
            await store.revoke(key_id)
        finally:
            await store.aclose()

    try:
        asyncio.run(revoke())
    except Exception as exc:  # noqa: BLE001 - said, not raised: the stop goes on
        print(f"memfleet: could not revoke the dev key {key_id} ({type(exc).__name__}): "
              f"`memfleet keys revoke {key_id}` does", file=sys.stderr, flush=True)


def _child_env(settings: ApiSettings, secret: str) -> dict[str, str]:
    """The children's settings: this process's environment with the servers resolved
    (so that they use, and never start, the same ones) and the JWT key."""
    env = dict(os.environ)
    env.update({"MEMFLEET_DATABASE_URL": settings.database_url or "",
                "MEMFLEET_REDIS_URL": settings.redis_url or "",
                "MEMFLEET_JWT_SECRET": secret})
    if settings.erase_fence_key is not None:
        env["MEMFLEET_ERASE_FENCE_KEY"] = settings.erase_fence_key.get_secret_value()
    return env


class Child:
    """A `memfleet` command run by dev, its output in a log file of its own."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.name, self.process, self.log = name, process, log

    @classmethod
    def spawn(cls, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> Child:
        log = log_dir / f"{argv[0]}.log"
        with log.open("ab") as out:
            process = subprocess.Popen([sys.executable, "-m", "worker.cli", *argv], env=env,
                                       stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT,
                                       # Ctrl-C reaches dev alone; dev stops them in order.
                                       start_new_session=True,
                                       preexec_fn=_die_with_parent)
        return cls(name, process, log)

    def exited(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _die_with_parent() -> None:
    """In the child, before it runs: SIGTERM when dev dies, even by SIGKILL, so that no
    worker or API outlives it (Linux's PR_SET_PDEATHSIG; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _wait_ready(settings: ApiSettings, api_url: str, children: list[Child]) -> None:
    """Until the API answers ready and the worker has written its first heartbeat (from
    then it takes jobs), so that what dev prints works when it is printed."""
    import httpx
    from redis import Redis
    from redis.exceptions import RedisError

    from worker.protocol.keys import workers_key

    deadline = time.monotonic() + READY_TIMEOUT_S
    api_ready = worker_ready = False
    with Redis.from_url(settings.redis_url or "", socket_timeout=2) as redis:
        while time.monotonic() < deadline:
            _check_alive(children)
            with contextlib.suppress(httpx.HTTPError):
                api_ready = api_ready or httpx.get(f"{api_url}/readyz",
                                                   timeout=2).status_code == 200
            with contextlib.suppress(RedisError):
                worker_ready = worker_ready or redis.hlen(workers_key(settings.queue_name)) > 0
            if api_ready and worker_ready:
                return
            time.sleep(0.2)
    late = children[0] if not worker_ready else children[1]
    raise MemfleetError(f"the {late.name} did not get ready within {READY_TIMEOUT_S:g} s: "
                        f"see {late.log}")


def _check_alive(children: list[Child]) -> None:
    for child in children:
        code = child.exited()
        if code is not None:
            raise MemfleetError(f"the {child.name} stopped (exit {code}): see {child.log}")


def _run_until_stopped(children: list[Child]) -> int:
    """Until Ctrl-C or SIGTERM (exit 0), or a child's end (exit 2, naming it)."""
    stop: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        stop.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop:
            _check_alive(children)
            time.sleep(0.2)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


def _paste(api_url: str, key: str, user: str, panel: str, secret_file: Path | None,
           dev_dir: Path) -> str:
    """What dev prints on stdout: shell lines to paste, each explained."""
    auth = '-H "Authorization: Bearer $MEMFLEET_SERVICE_KEY"'
    said = ('{"messages": [{"role": "user", "content": "Hi, I am Grace and I live in '
            'Oslo. I work with Rust these days."}]}')
    session = f"$MEMFLEET_API_URL/users/{user}/sessions/first"
    token_line = (f"memfleet token --user {user} --panel"
                  + (f" --secret-file {secret_file}" if secret_file else ""))
    return "\n".join([
        "# memfleet dev is running: the embedded servers, a worker and the memory API.",
        "# Ctrl-C stops it all (the service key below is revoked then).",
        f"export MEMFLEET_API_URL={api_url}",
        f"export MEMFLEET_SERVICE_KEY={key}",
        "",
        "# Hand a conversation over (202 and its hand-over id), wait until the worker has",
        "# committed it, then read what is remembered, as a chat server would:",
        f"H=$(curl -sS {auth} -H 'Content-Type: application/json' -d '{said}' "
        f'"{session}/handover" | tr -dc 0-9)',
        f'curl -sS {auth} "{session}/handovers/$H/wait?timeout_s=20"; echo',
        f'curl -sS {auth} "$MEMFLEET_API_URL/users/{user}/known-facts"; echo',
        "",
        f"# {user}'s memory panel (the link holds a token for an hour; `{token_line}`",
        "# mints another):",
        f"#   {panel}",
        f"# Logs: {dev_dir / 'worker.log'}, {dev_dir / 'api.log'}",
    ])
