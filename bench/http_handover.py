"""The hand-over over HTTP against the direct Redis hand-over, on one machine in one run.

Starts throwaway PostgreSQL and Redis and two memory API processes (``memfleet
api``, each on its own port, one Redis), creates a service key with the
``handover`` scope, then hands sessions over in blocks: HTTP at 1 and at 16 in flight
(the clients round-robin over both API processes with keep-alive: bench.lib.raw_http, a
minimal client that costs its process a tenth of what httpx does, so the row measures
the server; and httpx, as a Python chat server would send) and the Python client
straight to Redis (``schedule_memory_persistence``) at 1 and 16, and
the TypeScript client's Redis hand-over when clients/typescript/dist/bench/handover.js is
built. Each block is a process of its own (bench.lib.handover_client), measuring at the
client after a warm-up; the blocks go round in a fresh random order each round so a
slow minute of the VM lands on every transport alike. Every hand-over is a session
of a user of its own (no budget ever refuses one) and Redis is emptied between
blocks (no worker runs, so nothing else would). Target: HTTP p99 at most 5 ms with
16 in flight (the raw client's row is the server's figure).

    .venv/bin/python -m bench.http_handover [--requests 4000] [--client-procs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from redis import Redis

from bench.lib.api_procs import api_argv, api_env, free_port, running
from bench.lib.proc import cpu_s, load_1min
from bench.lib.servers import throwaway_servers
from bench.lib.stats import ms, pct, table
from worker.embedded.process import read_int
from worker.store.migrate import migrate
from worker.store.service_keys import ServiceKeyStore

ROOT = Path(__file__).resolve().parents[1]
TS_BENCH = ROOT / "clients" / "typescript" / "dist" / "bench" / "handover.js"
TARGET_P99_MS = 5.0
HTTP = ("http-raw", "http")


@dataclass(frozen=True, slots=True)
class Block:
    transport: str  # "http-raw" (bench.lib.raw_http), "http" (httpx), "redis" (Python),
    # "redis-ts" (TypeScript)
    concurrency: int
    think_ms: float = 0.0  # 0: hand-overs back to back; else turns waiting for answers

    @property
    def in_flight(self) -> str:
        if not self.think_ms:
            return str(self.concurrency)
        return f"{self.concurrency} turns, {self.think_ms:g} ms answers"


@dataclass(slots=True)
class Measured:
    latencies_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    api_cpu_s: float = 0.0
    redis_cpu_s: float = 0.0
    client_cpu_s: float | None = 0.0  # None: the client does not say (TypeScript)


def split(concurrency: int, procs: int) -> list[int]:
    """``concurrency`` callers over at most ``procs`` processes, as evenly as it goes."""
    procs = max(1, min(procs, concurrency))
    return [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]


def client_argv(block: Block, in_flight: int, requests: int, tag: str, *, api_urls: list[str],
                key: str, redis_url: str, warmup: int) -> list[str]:
    if block.transport == "redis-ts":
        return ["node", str(TS_BENCH), "--redis-url", redis_url, "--requests", str(requests),
                "--concurrency", str(in_flight), "--warmup", str(warmup)]
    argv = [sys.executable, "-m", "bench.lib.handover_client", "--transport", block.transport,
            "--requests", str(requests), "--concurrency", str(in_flight), "--tag", tag,
            "--warmup", str(warmup), "--ready", "--think-ms", str(block.think_ms)]
    if block.transport in HTTP:
        argv += [a for url in api_urls for a in ("--api-url", url)] + ["--key", key]
    else:
        argv += ["--redis-url", redis_url]
    return argv


def run_block(block: Block, requests: int, procs: int, tag: str, api_pids: list[int],
              redis_pid: int, **where: object) -> Measured:
    """One block: its client processes warmed up, started together, their answers read."""
    shares = split(block.concurrency, 1 if block.transport == "redis-ts" else procs)
    started_procs = []
    for i, in_flight in enumerate(shares):
        count = requests * in_flight // block.concurrency
        argv = client_argv(block, in_flight, count, f"{tag}p{i}", **where)  # type: ignore[arg-type]
        started_procs.append(subprocess.Popen(  # noqa: S603 - our own modules, or node
            argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    try:
        if block.transport != "redis-ts":
            for proc in started_procs:
                assert proc.stdout is not None
                if proc.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"a {block.transport} client failed to warm up")
        api_before, redis_before = sum(cpu_s(pid) for pid in api_pids), cpu_s(redis_pid)
        began = time.perf_counter()
        for proc in started_procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        measured = Measured()
        for proc in started_procs:
            out, _ = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"a {block.transport} client exited {proc.returncode}")
            answer = json.loads(out.strip().splitlines()[-1])
            measured.latencies_ms += answer["latencies_ms"]
            if measured.client_cpu_s is not None and "cpu_s" in answer:
                measured.client_cpu_s += answer["cpu_s"]
            else:
                measured.client_cpu_s = None
        measured.wall_s = time.perf_counter() - began
        measured.api_cpu_s = sum(cpu_s(pid) for pid in api_pids) - api_before
        measured.redis_cpu_s = cpu_s(redis_pid) - redis_before
        return measured
    finally:
        for proc in started_procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def merge(into: Measured, block: Measured) -> None:
    into.latencies_ms += block.latencies_ms
    into.wall_s += block.wall_s
    into.api_cpu_s += block.api_cpu_s
    into.redis_cpu_s += block.redis_cpu_s
    if into.client_cpu_s is not None and block.client_cpu_s is not None:
        into.client_cpu_s += block.client_cpu_s
    else:
        into.client_cpu_s = None


def report(results: dict[Block, Measured], procs: int) -> str:
    names = {"http-raw": "HTTP, raw client (2 API processes)",
             "http": "HTTP, httpx (2 API processes)", "redis": "Redis, Python client",
             "redis-ts": "Redis, TypeScript client"}
    headers = ["hand-over", "in flight", "n", "p50 ms", "p95 ms", "p99 ms", "max ms",
               "per s", "client CPU ms each", "API CPU ms each", "Redis CPU ms each"]
    rows = []
    for block, m in results.items():
        n, lat = len(m.latencies_ms), m.latencies_ms
        rows.append([names[block.transport], block.in_flight, str(n),
                     ms(pct(lat, 50)), ms(pct(lat, 95)), ms(pct(lat, 99)), ms(max(lat)),
                     f"{n / m.wall_s:.0f}" if m.wall_s else "-",
                     "-" if m.client_cpu_s is None else ms(m.client_cpu_s * 1000 / n),
                     ms(m.api_cpu_s * 1000 / n) if block.transport in HTTP else "-",
                     ms(m.redis_cpu_s * 1000 / n)])
    lines = [table(headers, rows), ""]
    for block, m in results.items():
        if block.transport in HTTP and block.concurrency >= 16:
            p99 = pct(m.latencies_ms, 99)
            verdict = "PASS" if p99 <= TARGET_P99_MS else "FAIL"
            lines.append(f"{names[block.transport]} hand-over p99, {block.in_flight} in flight:"
                         f" {p99:.2f} ms"
                         f" (target <= {TARGET_P99_MS:g} ms): {verdict}")
    lines.append(f"client processes per block at 16 in flight: {procs}")
    return "\n".join(lines)


async def handover_key(database_url: str) -> str:
    keys = await ServiceKeyStore.connect(database_url)
    try:
        _, key = await keys.create("bench http hand-over", ("handover",))
        return key
    finally:
        await keys.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_handover", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4000, help="hand-overs per row")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=100, help="per client process and block")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--paced-requests", type=int, default=800,
                        help="hand-overs per paced row (0: no paced rows)")
    parser.add_argument("--think-ms", type=float, default=500.0,
                        help="the paced rows' answer time: each caller waits about this long"
                             " after each hand-over, as a chat turn waits for its model")
    parser.add_argument("--client-procs", type=int, default=1,
                        help="load-generating processes a block's callers are spread over")
    args = parser.parse_args(argv)
    transports = ["http-raw", "http", "redis"]
    ts_note = ""
    if TS_BENCH.is_file() and shutil.which("node"):
        transports.append("redis-ts")
    else:
        ts_note = ("TypeScript rows: not run; clients/typescript/dist/bench/handover.js is not"
                   " built (`make typescript`).")
    blocks = [Block(t, c) for t in transports for c in args.concurrency]
    if args.paced_requests:
        blocks += [Block(t, max(args.concurrency), args.think_ms)
                   for t in ("http-raw", "http", "redis")]
    results = {block: Measured() for block in blocks}
    with throwaway_servers(durable=False) as servers, ExitStack() as stack:
        asyncio.run(migrate(servers.database_url, embed_dim=1536))
        key = asyncio.run(handover_key(servers.database_url))
        ports = [free_port(), free_port()]
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        pids = [stack.enter_context(running(api_argv(port), api_env(servers), url, "/healthz"))
                for port, url in zip(ports, urls, strict=True)]
        redis = stack.enter_context(Redis.from_url(servers.redis_url))
        redis_pid = read_int(servers.root / "redis" / "redis.pid")
        if redis_pid is None:
            raise RuntimeError("the bench's Redis wrote no pid file")
        order = random.Random(28)
        for r in range(args.rounds):
            for block in order.sample(blocks, len(blocks)):
                redis.flushdb()  # no worker: start every block from an empty Redis
                tag = f"r{r}{block.transport}{block.concurrency}t{block.think_ms:g}"
                count = args.paced_requests if block.think_ms else args.requests
                merge(results[block], run_block(
                    block, count // args.rounds, args.client_procs, tag, pids, redis_pid,
                    api_urls=urls, key=key, redis_url=servers.redis_url,
                    warmup=args.warmup))
    print(f"2 API processes, one Redis; {args.rounds} rounds; load {load_1min()} at the end.")
    print()
    print(report(results, args.client_procs))
    if ts_note:
        print(ts_note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
