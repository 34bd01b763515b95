"""The memory API of two revisions side by side: the hand-over or the prompt read over
HTTP, interleaved in one run on one pair of throwaway servers.

``--against REV`` is unpacked (``git archive``, no worktree registered) into a
temporary directory; this checkout's API and REV's run as processes of their own
(``memfleet api``, one each; ``python -m api_stub.serve`` in a revision before it)
on the same PostgreSQL and Redis, migrated by this checkout (REV's API must accept
that schema). The same client reads both: ``handover`` blocks (bench.lib.handover_client,
``--client raw`` or ``httpx``, at each ``--concurrency``) or ``read`` rows
(bench.prompt_read's users, rows and client; both revisions read the same users, so
a change of how rows are stored shows only in a run of its own). Blocks and rows go
round in a fresh random order each round, so a slow minute of the VM lands on both
revisions alike.

    .venv/bin/python -m bench.ab.api_ab --against a755c2c handover [--requests 2000]
    .venv/bin/python -m bench.ab.api_ab --against a755c2c read [--requests 800]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path

import httpx
from redis import Redis

from bench.http_handover import handover_key
from bench.lib.api_procs import api_argv, api_env, free_port, running, stub_argv
from bench.lib.proc import cpu_s, load_1min
from bench.lib.servers import Servers, throwaway_servers
from bench.lib.stats import ms, pct, table
from bench.prompt_read import (
    DIM,
    MODEL,
    HttpxReads,
    Measured,
    RawReads,
    Reads,
    Row,
    questions,
    read_key,
    run_row,
    seed,
)
from worker.config import Settings
from worker.store.migrate import migrate

ROOT = Path(__file__).resolve().parents[2]
THIS = "this checkout"


@contextmanager
def unpacked(rev: str) -> Iterator[Path]:
    """``rev``'s tree in a temporary directory (its schema link as the checkout has it)."""
    with tempfile.TemporaryDirectory(prefix="memfleet-ab-") as tmp:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True,  # noqa: S603, S607
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)  # noqa: S603, S607
        tree = Path(tmp)
        if not (tree / "memfleet_schema").exists():
            (tree / "memfleet_schema").symlink_to("schema")
        yield tree


def start_apis(stack: ExitStack, trees: dict[str, Path], env: dict[str, str]) -> dict[
        str, tuple[str, int]]:
    """Each tree's API on a port of its own: name -> (url, pid)."""
    started = {}
    for name, tree in trees.items():
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        pid = stack.enter_context(running(api_argv(port, tree=tree),
                                          env | {"PYTHONPATH": str(tree)},
                                          url, "/healthz", cwd=tree))
        started[name] = (url, pid)
    return started


def handover_ab(servers: Servers, trees: dict[str, Path], args: argparse.Namespace) -> str:
    asyncio.run(migrate(servers.database_url, embed_dim=DIM))
    key = asyncio.run(handover_key(servers.database_url))
    blocks = [(name, c) for name in trees for c in args.concurrency]
    took: dict[tuple[str, int], list[float]] = {b: [] for b in blocks}
    cpu = {b: [0.0, 0.0, 0] for b in blocks}  # client s, API s, hand-overs incl. warm-up
    transport = "http-raw" if args.client == "raw" else "http"
    with ExitStack() as stack:
        apis = start_apis(stack, trees, api_env(servers))
        redis = stack.enter_context(Redis.from_url(servers.redis_url))
        order = random.Random(28)
        for r in range(args.rounds):
            for name, c in order.sample(blocks, len(blocks)):
                redis.flushdb()
                url, pid = apis[name]
                before = cpu_s(pid)
                out = subprocess.run(  # noqa: S603 - our own module
                    [sys.executable, "-m", "bench.lib.handover_client", "--transport", transport,
                     "--api-url", url, "--key", key, "--requests", str(args.requests),
                     "--concurrency", str(c), "--tag", f"r{r}{c}{len(name)}", "--warmup",
                     str(args.warmup)], cwd=ROOT, check=True, capture_output=True,
                    text=True).stdout
                answer = json.loads(out.strip().splitlines()[-1])
                took[(name, c)] += answer["latencies_ms"]
                cpu[(name, c)][0] += answer["cpu_s"]
                cpu[(name, c)][1] += cpu_s(pid) - before
                cpu[(name, c)][2] += args.requests + args.warmup
    rows = [[name, str(c), str(len(lat)), ms(pct(lat, 50)), ms(pct(lat, 99)),
             ms(cpu[(name, c)][0] * 1000 / len(lat)),
             ms(cpu[(name, c)][1] * 1000 / cpu[(name, c)][2])]
            for (name, c), lat in sorted(took.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    return table(["API", "in flight", "n", "p50 ms", "p99 ms", "client CPU ms each",
                  "API CPU ms each"], rows)


async def _reads(urls: dict[str, str], stub_url: str, key: str, rows: list[Row],
                 users: dict[int, list[str]], args: argparse.Namespace,
                 ) -> dict[tuple[str, Row], Measured]:
    asked = questions()
    random.Random(28).shuffle(asked)
    results = {(name, row): Measured() for name in urls for row in rows}
    raw = {name: RawReads(url, key) for name, url in urls.items()}
    async with AsyncExitStack() as clients:
        stub = await clients.enter_async_context(httpx.AsyncClient(base_url=stub_url,
                                                                   timeout=30))
        reads: dict[str, Reads] = dict(raw)
        if args.client == "httpx":
            reads = {name: HttpxReads(await clients.enter_async_context(httpx.AsyncClient(
                base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"})))
                for name, url in urls.items()}
        try:
            for name in urls:
                for row in rows:  # connections, prepared statements, the key's cache
                    await run_row(reads[name], stub, row, users[row.facts], asked,
                                  args.warmup, Measured())
            order = random.Random(7)
            blocks = [(name, row) for name in urls for row in rows]
            for _ in range(args.rounds):
                for name, row in order.sample(blocks, len(blocks)):
                    await run_row(reads[name], stub, row, users[row.facts], asked,
                                  args.requests // args.rounds, results[(name, row)])
        finally:
            for one in raw.values():
                await one.aclose()
    return results


def read_ab(servers: Servers, trees: dict[str, Path], args: argparse.Namespace) -> str:
    asyncio.run(migrate(servers.database_url, embed_dim=DIM))
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    embeddings = {"embed_provider": "openai", "embed_base_url": stub_url + "/v1",
                  "embed_model": MODEL, "embed_dim": str(DIM)}
    settings = Settings(database_url=servers.database_url, redis_url=servers.redis_url,
                        home_dir=servers.root / "home", embed_provider="openai",
                        embed_base_url=stub_url + "/v1", embed_model=MODEL, embed_dim=DIM)
    users = {50: [f"u50-{i}" for i in range(args.users)],
             1000: [f"u1000-{i}" for i in range(args.users)]}
    rows = [Row(facts, query, 1) for facts in users for query in (True, False)]
    with ExitStack() as stack:
        stack.enter_context(running(stub_argv(stub_port), api_env(servers), stub_url,
                                    "/_stub/requests"))
        asyncio.run(seed(settings, {u: n for n, us in users.items() for u in us}))
        key = asyncio.run(read_key(servers.database_url))
        apis = start_apis(stack, trees, api_env(servers, **embeddings))
        results = asyncio.run(_reads({name: url for name, (url, _) in apis.items()},
                                     stub_url, key, rows, users, args))
    table_rows = [[name, str(row.facts), "yes" if row.query else "no", str(len(m.total_ms)),
                   ms(pct(m.outside_ms, 50)), ms(pct(m.outside_ms, 99)),
                   ms(pct(m.store_ms, 50)), ms(pct(m.store_ms, 99)), str(m.model_calls)]
                  for row in rows for name in trees for m in [results[(name, row)]]]
    return table(["API", "facts", "q", "reads", "outside model p50", "outside model p99",
                  "store p50", "store p99", "model calls"], table_rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab.api_ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, help="the other revision (git rev)")
    parser.add_argument("what", choices=("handover", "read"))
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw")
    parser.add_argument("--requests", type=int, default=None,
                        help="per block and round (handover, default 2000) or per row and"
                             " revision (read, default 800)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16],
                        help="hand-overs in flight (handover)")
    parser.add_argument("--users", type=int, default=2, help="users of each size (read)")
    args = parser.parse_args(argv)
    if args.requests is None:
        args.requests = 2000 if args.what == "handover" else 800
    with unpacked(args.against) as other, throwaway_servers(durable=False) as servers:
        trees = {THIS: ROOT, args.against: other}
        run = handover_ab if args.what == "handover" else read_ab
        report = run(servers, trees, args)
    print(f"{args.what}, {args.client} client, {args.rounds} rounds; load {load_1min()}"
          " at the end.")
    print()
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
