"""One load-generating process of bench.http_handover: hands sessions over, N at a time,
through HTTP (``POST /users/{u}/sessions/{s}/handover``, round-robin over the API
processes, httpx with keep-alive, or ``http-raw``: bench.lib.raw_http, a minimal
HTTP/1.1 client far cheaper in CPU, so that the bench measures the server) or straight
to Redis
(``schedule_memory_persistence``), and prints ``{"latencies_ms": [...], "cpu_s": s}``: the
TypeScript client's bench (clients/typescript/dist/bench/handover.js) prints the same, without
``cpu_s`` (this process's CPU seconds over the measured hand-overs).

Every hand-over is a session of its own of a user of its own, so no budget refuses
one. Warm-up hand-overs (connections, the script's SHA) are not measured. With
``--ready`` it prints ``ready`` after the warm-up and waits for a line on stdin, so
several processes start measuring together.

    python -m bench.lib.handover_client --transport http --api-url URL [--api-url URL2] \\
        --key KEY --requests N --concurrency C --tag T
    python -m bench.lib.handover_client --transport redis --redis-url URL --requests N ...
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from redis.asyncio import Redis

from bench.lib.raw_http import RawConnection
from worker.client.handover import schedule_memory_persistence

HandOver = Callable[[str, str], Awaitable[None]]


def chat_messages(turns: int = 2) -> list[dict[str, str]]:
    """An ordinary short session: ``turns`` user turns with their answers."""
    said: list[dict[str, str]] = []
    for n in range(turns):
        said.append({"role": "user", "content": f"Turn {n}: I moved to Lisbon last spring and"
                                                " I am learning to play the cello."})
        said.append({"role": "assistant", "content": "That sounds lovely. How are the"
                                                     " lessons going so far?"})
    return said


async def measure(hand_over: HandOver, *, requests: int, concurrency: int, tag: str,
                  warmup: int, wait_ready: bool, think_ms: float = 0.0,
                  ) -> tuple[list[float], float]:
    """The measured hand-overs' latencies (ms) and this process's CPU seconds over them.

    ``think_ms``: each caller waits about that long after each hand-over (0.5 to 1.5
    times, at random), as a chat server's turn waits for its model's answer, and the
    callers start spread over that time: ``concurrency`` turns in flight, not
    ``concurrency`` hand-overs back to back."""
    numbers = itertools.count()
    jitter = random.Random(tag)

    async def run(count: int, into: list[float] | None) -> None:
        remaining = iter(range(count))

        async def one_caller(k: int) -> None:
            if think_ms and into is not None:
                await asyncio.sleep(think_ms / 1000 * k / concurrency)
            for _ in remaining:
                n = next(numbers)
                started = time.perf_counter()
                await hand_over(f"{tag}-u{n}", f"{tag}-s{n}")
                if into is not None:
                    into.append((time.perf_counter() - started) * 1000)
                    if think_ms:
                        await asyncio.sleep(think_ms / 1000 * jitter.uniform(0.5, 1.5))

        await asyncio.gather(*(one_caller(k) for k in range(concurrency)))

    await run(warmup, None)
    if wait_ready:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    took: list[float] = []
    cpu = time.process_time()
    await run(requests, took)
    return took, time.process_time() - cpu


async def main_async(args: argparse.Namespace) -> tuple[list[float], float]:
    messages = chat_messages()
    kwargs: dict[str, Any] = {"requests": args.requests, "concurrency": args.concurrency,
                              "tag": args.tag, "warmup": args.warmup, "wait_ready": args.ready,
                              "think_ms": args.think_ms}
    if args.transport == "redis":
        redis = Redis.from_url(args.redis_url)
        try:
            async def direct(user: str, session: str) -> None:
                await schedule_memory_persistence(redis, session, user, messages)

            return await measure(direct, **kwargs)
        finally:
            await redis.aclose()
    if args.transport == "http-raw":
        return await raw_http_measure(args, messages, kwargs)
    limits = httpx.Limits(max_connections=args.concurrency,
                          max_keepalive_connections=args.concurrency)
    clients = [httpx.AsyncClient(base_url=url, limits=limits, timeout=10,
                                 headers={"Authorization": f"Bearer {args.key}"})
               for url in args.api_url]
    turn = itertools.cycle(clients)
    body = {"messages": messages}
    try:
        async def over_http(user: str, session: str) -> None:
            resp = await next(turn).post(f"/users/{user}/sessions/{session}/handover",
                                         json=body)
            if resp.status_code != 202:
                raise RuntimeError(f"hand-over answered {resp.status_code}: {resp.text[:200]}")

        return await measure(over_http, **kwargs)
    finally:
        for client in clients:
            await client.aclose()


async def raw_http_measure(args: argparse.Namespace, messages: list[dict[str, str]],
                           kwargs: dict[str, Any]) -> tuple[list[float], float]:
    """The same requests through bench.lib.raw_http: keep-alive connections, each used by one
    hand-over at a time, round-robin over the API processes."""
    headers = {"Authorization": f"Bearer {args.key}"}
    idle: dict[str, list[RawConnection]] = {url: [] for url in args.api_url}
    turn = itertools.cycle(args.api_url)
    body = json.dumps({"messages": messages}).encode()
    try:
        async def over_raw_http(user: str, session: str) -> None:
            url = next(turn)
            conn = idle[url].pop() if idle[url] else RawConnection(url, headers)
            resp = await conn.request("POST", f"/users/{user}/sessions/{session}/handover",
                                      body)
            if resp.status != 202:
                raise RuntimeError(f"hand-over answered {resp.status}: {resp.body[:200]!r}")
            idle[url].append(conn)

        return await measure(over_raw_http, **kwargs)
    finally:
        for conns in idle.values():
            for conn in conns:
                await conn.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lib.handover_client",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", choices=("http", "http-raw", "redis"), required=True)
    parser.add_argument("--api-url", action="append", default=[], help="repeat: round-robin")
    parser.add_argument("--key", help="a service key with the handover scope (http)")
    parser.add_argument("--redis-url", help="the fleet's Redis (redis)")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--think-ms", type=float, default=0.0,
                        help="each caller's wait after a hand-over (a model's answer time)")
    parser.add_argument("--tag", default="bench", help="prefix of the user and session ids")
    parser.add_argument("--ready", action="store_true",
                        help="after the warm-up print `ready`, wait for a line on stdin")
    args = parser.parse_args(argv)
    if args.transport != "redis" and not (args.api_url and args.key):
        parser.error(f"--transport {args.transport} needs --api-url and --key")
    if args.transport == "redis" and not args.redis_url:
        parser.error("--transport redis needs --redis-url")
    took, cpu_s = asyncio.run(main_async(args))
    print(json.dumps({"latencies_ms": took, "cpu_s": cpu_s}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
