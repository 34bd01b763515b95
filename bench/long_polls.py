"""What one caller's long-lived requests cost the memory API and Redis.

Throwaway PostgreSQL and Redis (embedded), the API as a process of its own
(``memfleet api``, offline providers). Two bursts, one after the other:

- ``--waits`` concurrent ``GET .../handovers/1/wait?timeout_s=T`` on one end
  user's token (each on a session of its own, none ever covered: every admitted
  wait lasts T seconds), and one wait of another user while they are open;
- ``--key-waits`` concurrent waits on one service key (as a chat server waits for
  its users: each of another user's session), within the key's default share;
- ``--streams`` concurrent ``GET /events`` on one service key, held for T
  seconds, and one stream of another key while they are open.

For each: the status codes each caller got, the API process's CPU seconds
(/proc/<pid>/stat) and Redis's commands a second (INFO ``total_commands_processed``)
over the burst's window. ``--api-root`` runs another checkout's API (its
.venv/bin/python, its code): the same bench before and after a change.

    .venv/bin/python -m bench.long_polls [--waits 300] [--streams 40] [--hold-s 15]
        [--api-root /work/main]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from redis.asyncio import Redis

from bench.lib.api_procs import SECRET, api_argv, api_env, free_port, running
from bench.lib.proc import cpu_s
from bench.lib.servers import Servers, throwaway_servers
from worker.api.auth import AuthConfig, issue_token
from worker.store.migrate import migrate
from worker.store.service_keys import ServiceKeyStore

DIM = 64
PROVIDERS = {"llm_provider": "rules", "embed_provider": "hashing", "embed_dim": str(DIM)}


@dataclass(frozen=True, slots=True)
class Burst:
    name: str
    statuses: Counter[str]
    other: str  # what another caller got meanwhile
    wall_s: float
    api_cpu_s: float
    redis_commands: int

    def row(self) -> str:
        codes = ", ".join(f"{code} x{n}" for code, n in sorted(self.statuses.items()))
        return (f"{self.name}: {codes} | another caller meanwhile: {self.other} | "
                f"API CPU {self.api_cpu_s:.2f} s in {self.wall_s:.1f} s | Redis "
                f"{self.redis_commands / self.wall_s:.0f} commands/s "
                f"({self.redis_commands} commands)")


async def _commands(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_commands_processed"])


async def _measure(name: str, pid: int, redis: Redis,
                   burst: Callable[[], Awaitable[tuple[Counter[str], str]]]) -> Burst:
    cpu0, commands0, t0 = cpu_s(pid), await _commands(redis), time.monotonic()
    statuses, other = await burst()
    wall = time.monotonic() - t0
    commands = await _commands(redis) - commands0 - 2  # less this bench's two INFOs
    return Burst(name, statuses, other, wall, cpu_s(pid) - cpu0, commands)


def _outcome(status: int, body: bytes) -> str:
    """The status, with the refusal's kind (the JSON ``error``) when it names one."""
    if status == 200:
        return "200"
    try:
        return f"{status} {json.loads(body).get('error')}"
    except ValueError:
        return str(status)


async def _wait(api: httpx.AsyncClient, user: str, session: str, hold_s: float,
                key: str | None = None) -> str:
    answer = await api.get(f"/users/{user}/sessions/{session}/handovers/1/wait",
                           params={"timeout_s": hold_s},
                           headers={"Authorization": f"Bearer {key or _token(user)}"})
    return _outcome(answer.status_code, answer.content)


def _token(user: str) -> str:
    return issue_token(AuthConfig(SECRET), user, ttl_s=3600)


async def _waits(api: httpx.AsyncClient, count: int, hold_s: float, key: str | None = None
                 ) -> tuple[Counter[str], str]:
    tasks = [asyncio.ensure_future(_wait(api, "bench-one" if key is None else f"u{i}",
                                         f"s{i}", hold_s, key)) for i in range(count)]
    await asyncio.sleep(1.0)  # the burst is in: another user's wait
    other = await _wait(api, "bench-other", "s0", 0.5)
    return Counter(await asyncio.gather(*tasks)), other


async def _stream(api: httpx.AsyncClient, key: str, hold_s: float) -> str:
    async with api.stream("GET", "/events", headers={"Authorization": f"Bearer {key}"}) as got:
        if got.status_code == 200:
            with_deadline = asyncio.timeout(hold_s)
            try:
                async with with_deadline:
                    async for _ in got.aiter_raw():
                        pass
            except TimeoutError:
                pass
            return "200"
        return _outcome(got.status_code, await got.aread())


async def _streams(api: httpx.AsyncClient, one: str, other: str, count: int, hold_s: float
                   ) -> tuple[Counter[str], str]:
    tasks = [asyncio.ensure_future(_stream(api, one, hold_s)) for _ in range(count)]
    await asyncio.sleep(1.0)
    another = await _stream(api, other, 0.5)
    return Counter(await asyncio.gather(*tasks)), another


async def _keys(database_url: str) -> tuple[str, str]:
    store = await ServiceKeyStore.connect(database_url)
    try:
        return ((await store.create("bench one", ("read",)))[1],
                (await store.create("bench other", ("read",)))[1])
    finally:
        await store.aclose()


async def _run(args: argparse.Namespace, servers: Servers, pid: int, url: str) -> list[Burst]:
    one, other = await _keys(servers.database_url)
    redis = Redis.from_url(servers.redis_url)
    limits = httpx.Limits(max_connections=max(args.waits, args.key_waits, args.streams) + 10)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=args.hold_s + 30,
                                     limits=limits) as api:
            return [
                await _measure(f"{args.waits} waits, one token", pid, redis,
                               lambda: _waits(api, args.waits, args.hold_s)),
                await _measure(f"{args.key_waits} waits, one service key", pid, redis,
                               lambda: _waits(api, args.key_waits, args.hold_s, one)),
                await _measure(f"{args.streams} streams, one key", pid, redis,
                               lambda: _streams(api, one, other, args.streams, args.hold_s)),
            ]
    finally:
        await redis.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.long_polls", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waits", type=int, default=300)
    parser.add_argument("--key-waits", type=int, default=128)
    parser.add_argument("--streams", type=int, default=40)
    parser.add_argument("--hold-s", type=float, default=15.0,
                        help="each wait's timeout_s, and how long a stream is held")
    parser.add_argument("--api-root", type=Path, default=None,
                        help="run the API of this checkout (its .venv and code)")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="an API setting (MEMFLEET_ name without the prefix)")
    args = parser.parse_args(argv)
    root = (args.api_root or Path(__file__).resolve().parents[1]).resolve()
    python = root / ".venv" / "bin" / "python"
    extra = dict(item.split("=", 1) for item in args.setting)
    with throwaway_servers(durable=False) as servers:
        asyncio.run(migrate(servers.database_url, embed_dim=DIM))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv_ = [str(python) if python.exists() else sys.executable, *api_argv(port, tree=root)[1:]]
        env = api_env(servers, **PROVIDERS, **extra)
        env["PYTHONPATH"] = str(root)
        with running(argv_, env, url, "/healthz", cwd=root) as pid:
            print(f"API: {root} (pid {pid})")
            for burst in asyncio.run(_run(args, servers, pid, url)):
                print(burst.row())


if __name__ == "__main__":
    main()
