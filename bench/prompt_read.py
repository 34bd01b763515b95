"""The prompt read over HTTP: ``GET /users/{u}/known-facts?q=...`` with a read key, the
time memfleet adds outside the model call for the query's embedding, and that call
counted apart.

Starts throwaway PostgreSQL and Redis, the project's LLM stub (api_stub.llm_stub,
hashing embeddings) and the memory API (``memfleet api``) each in a
process of its own; the API's embeddings go to the stub over HTTP (the openai
provider, 1536 dimensions). Users with 50 and with 1,000 active facts are written
through the store (PostgresStore.add_fact, as the API's manual writes are), their
embeddings asked of the stub, so the neighbour query ranks real vectors. Then N reads
per row, each with a question (or none), one client with keep-alive (bench.lib.raw_http,
which costs its process a tenth of httpx's CPU, so the figure is the server's; or
``--client httpx``), over the rows in rounds so a slow minute of the VM lands on
every row alike.

Per read: the client's wall time (``total``), the embeddings call as the API timed it
(``embed`` of the Server-Timing header; worker.api.read_timing) and the difference,
``outside the model``: HTTP, authentication, PostgreSQL and the block. The stub's own
request log (``/_stub/requests``) counts the embeddings calls each row made. Target:
outside the model p99 at most 10 ms for a user with 1,000 facts; a user with at most
read_top_k (50) facts takes no model call.

    .venv/bin/python -m bench.prompt_read [--requests 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlencode

import httpx

from bench.lib.api_procs import api_argv, api_env, free_port, running, stub_argv
from bench.lib.proc import load_1min
from bench.lib.raw_http import RawConnection
from bench.lib.servers import Servers, throwaway_servers
from bench.lib.stats import ms, pct, table
from worker.config import Settings
from worker.memory_rules import CATEGORY_ORDER
from worker.providers.factory import build_embedder
from worker.store.fence_key import fence_keys
from worker.store.migrate import migrate
from worker.store.postgres import PostgresStore
from worker.store.service_keys import ServiceKeyStore
from worker.store.types import NewFact

DIM = 1536
MODEL = "text-embedding-3-small"  # the openai provider's default; the stub takes any name
EMBED_PATH = "/v1/embeddings"
TARGET_P99_MS = 10.0
TOPICS = ("sourdough", "bouldering", "cello", "Lisbon", "beekeeping", "chess", "Kyoto",
          "marathons", "watercolour", "Rust", "gardening", "jazz", "sailing", "Berlin",
          "pottery", "astronomy", "cycling", "Spanish", "photography", "hiking", "knitting",
          "vinyl", "espresso", "Oslo", "yoga", "birdwatching", "calligraphy", "Python",
          "surfing", "opera", "tennis", "origami", "Nairobi", "kayaking", "baking", "poetry")
SAYINGS = ("Likes {t}", "Took up {t} in {y}", "Has a friend who is into {t}",
           "Wants to get better at {t}", "Talked about {t} at length in {y}",
           "Gave up {t} for a while in {y}", "Reads about {t} on weekends",
           "Went on a trip about {t} in {y}")
QUESTIONS = ("what do you know about my {t}", "can you suggest something for {t}",
             "remind me what I said about {t}", "any plans around {t} this year",
             "help me write a note about {t}")


def fact_texts(count: int) -> list[str]:
    """``count`` distinct facts, over many topics, so words and meaning both rank."""
    return [SAYINGS[n % len(SAYINGS)].format(t=TOPICS[n // len(SAYINGS) % len(TOPICS)],
                                             y=1990 + n % 35) + f" (note {n})"
            for n in range(count)]


def questions() -> list[str]:
    return [q.format(t=t) for t in TOPICS for q in QUESTIONS]


def timing_parts(header: str | None) -> dict[str, float]:
    """``embed;dur=1.2, store;dur=0.8, total;dur=2.4`` -> {"embed": 1.2, ...} (ms); metrics
    without a duration are left out."""
    parts: dict[str, float] = {}
    for metric in (header or "").split(","):
        name, _, params = metric.strip().partition(";")
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "dur" and name:
                parts[name] = float(value)
    return parts


@dataclass(frozen=True, slots=True)
class Row:
    facts: int
    query: bool
    concurrency: int

    @property
    def label(self) -> str:
        return f"{self.facts} facts, {'q' if self.query else 'no q'}, {self.concurrency} in flight"


@dataclass(slots=True)
class Measured:
    total_ms: list[float] = field(default_factory=list)
    outside_ms: list[float] = field(default_factory=list)
    model_ms: list[float] = field(default_factory=list)  # reads that called the model only
    store_ms: list[float] = field(default_factory=list)  # the read outside the model, server-side
    model_calls: int = 0  # as Server-Timing says
    stub_calls: int = 0  # as the stub's request log says

    def add(self, total_ms: float, parts: dict[str, float]) -> None:
        embed = parts.get("embed")
        self.total_ms.append(total_ms)
        self.outside_ms.append(total_ms - (embed or 0.0))
        self.store_ms.append(parts["store"])
        if embed is not None:
            self.model_calls += 1
            self.model_ms.append(embed)


async def seed(settings: Settings, users: dict[str, int]) -> None:
    """Each user's facts through the store, embedded by the stub over HTTP; one write at
    a time per user (each write moves the user's version), the users side by side."""
    embedder = build_embedder(settings, MODEL, DIM)
    store = await PostgresStore.connect(settings.database_url or "", max_size=4,
                                        fences=fence_keys(None, settings.home_dir))

    async def one_user(user: str, count: int) -> None:
        texts = fact_texts(count)
        for start in range(0, count, 100):
            batch = texts[start:start + 100]
            vectors = (await embedder.embed(batch)).value
            for n, (text, vector) in enumerate(zip(batch, vectors, strict=True), start=start):
                await store.add_fact(user, NewFact(
                    text, CATEGORY_ORDER[n % len(CATEGORY_ORDER)], 1 + n % 10, vector, MODEL))

    try:
        await asyncio.gather(*(one_user(user, count) for user, count in users.items()))
    finally:
        await store.aclose()
        close = getattr(embedder, "aclose", None)
        if close is not None:
            await close()


async def read_key(database_url: str) -> str:
    keys = await ServiceKeyStore.connect(database_url)
    try:
        _, key = await keys.create("bench prompt read", ("read",))
        return key
    finally:
        await keys.aclose()


class Reads(Protocol):
    async def get(self, path: str, params: dict[str, str]) -> tuple[int, str | None]:
        """(status, the Server-Timing header) of ``GET path?params``."""
        ...


class HttpxReads:
    """httpx with keep-alive, as a Python chat server would read."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def get(self, path: str, params: dict[str, str]) -> tuple[int, str | None]:
        resp = await self._client.get(path, params=params)
        return resp.status_code, resp.headers.get("server-timing")


class RawReads:
    """bench.lib.raw_http: a keep-alive connection per read in flight, a tenth of httpx's
    CPU per request, so the figure is the server's."""

    def __init__(self, url: str, key: str) -> None:
        self._url, self._headers = url, {"Authorization": f"Bearer {key}"}
        self._idle: list[RawConnection] = []

    async def get(self, path: str, params: dict[str, str]) -> tuple[int, str | None]:
        conn = self._idle.pop() if self._idle else RawConnection(self._url, self._headers)
        query = f"?{urlencode(params)}" if params else ""
        resp = await conn.request("GET", path + query)
        self._idle.append(conn)
        return resp.status, resp.headers.get("server-timing")

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.aclose()


async def run_row(reads: Reads, stub: httpx.AsyncClient, row: Row,
                  users: Sequence[str], asked: Sequence[str], count: int,
                  into: Measured) -> None:
    await stub.delete("/_stub/requests")
    pending = iter(range(count))

    async def reader() -> None:
        for n in pending:
            params = {"q": asked[n % len(asked)]} if row.query else {}
            started = time.perf_counter()
            status, timing = await reads.get(f"/users/{users[n % len(users)]}/known-facts",
                                             params)
            took = (time.perf_counter() - started) * 1000
            if status != 200:
                raise RuntimeError(f"the read answered {status}")
            into.add(took, timing_parts(timing))

    await asyncio.gather(*(reader() for _ in range(row.concurrency)))
    sent = (await stub.get("/_stub/requests")).json()["requests"]
    into.stub_calls += sum(r["path"] == EMBED_PATH for r in sent)


async def measure(api_url: str, stub_url: str, key: str, rows: list[Row],
                  users: dict[int, list[str]], requests: int, rounds: int,
                  warmup: int, client: str = "raw") -> dict[Row, Measured]:
    asked = questions()
    random.Random(28).shuffle(asked)
    results = {row: Measured() for row in rows}
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
    raw = RawReads(api_url, key)
    async with httpx.AsyncClient(base_url=api_url, limits=limits, timeout=30,
                                 headers={"Authorization": f"Bearer {key}"}) as api, \
            httpx.AsyncClient(base_url=stub_url, timeout=30) as stub:
        reads: Reads = raw if client == "raw" else HttpxReads(api)
        try:
            for row in rows:  # connections, prepared statements, the key's cache
                await run_row(reads, stub, row, users[row.facts], asked, warmup, Measured())
            order = random.Random(7)
            for _ in range(rounds):
                for row in order.sample(rows, len(rows)):
                    await run_row(reads, stub, row, users[row.facts], asked,
                                  requests // rounds, results[row])
        finally:
            await raw.aclose()
    return results


def report(results: dict[Row, Measured]) -> str:
    headers = ["facts", "q", "in flight", "reads", "total p50", "total p99",
               "outside model p50", "outside model p99", "model p50", "model p99",
               "model calls (stub)", "store p50", "store p99"]
    rows = [[str(r.facts), "yes" if r.query else "no", str(r.concurrency), str(len(m.total_ms)),
             ms(pct(m.total_ms, 50)), ms(pct(m.total_ms, 99)), ms(pct(m.outside_ms, 50)),
             ms(pct(m.outside_ms, 99)), ms(pct(m.model_ms, 50)), ms(pct(m.model_ms, 99)),
             f"{m.model_calls} ({m.stub_calls})", ms(pct(m.store_ms, 50)),
             ms(pct(m.store_ms, 99))]
            for r, m in results.items()]
    lines = [table(headers, rows), ""]
    for row, m in results.items():
        if row.facts >= 1000 and row.query:
            p99 = pct(m.outside_ms, 99)
            verdict = "PASS" if p99 <= TARGET_P99_MS else "FAIL"
            lines.append(f"outside the model p99, {row.label}: {p99:.2f} ms"
                         f" (target <= {TARGET_P99_MS:g} ms): {verdict}")
        if row.facts <= 50 and row.query:
            verdict = "PASS" if m.model_calls == m.stub_calls == 0 else "FAIL"
            lines.append(f"model calls, {row.label}: {m.stub_calls} (target 0): {verdict}")
    return "\n".join(lines)


def stub_and_api(servers: Servers) -> tuple[int, int, str, str, dict[str, str], Settings]:
    """Ports and URLs for the stub and the API, the API's embeddings settings (the stub's
    endpoint) as variables, and the same as Settings for seeding: what a read bench
    starts (this one and bench.prompt_split)."""
    stub_port, api_port = free_port(), free_port()
    stub_url, api_url = f"http://127.0.0.1:{stub_port}", f"http://127.0.0.1:{api_port}"
    embeddings = {"embed_provider": "openai", "embed_base_url": stub_url + "/v1",
                  "embed_model": MODEL, "embed_dim": str(DIM)}
    settings = Settings(database_url=servers.database_url, redis_url=servers.redis_url,
                        home_dir=servers.root / "home", embed_provider="openai",
                        embed_base_url=stub_url + "/v1", embed_model=MODEL, embed_dim=DIM)
    return stub_port, api_port, stub_url, api_url, embeddings, settings


def run(servers: Servers, args: argparse.Namespace) -> dict[Row, Measured]:
    stub_port, api_port, stub_url, api_url, embeddings, settings = stub_and_api(servers)
    sizes = {50: [f"u50-{i}" for i in range(args.users)],
             1000: [f"u1000-{i}" for i in range(args.users)]}
    rows = [Row(facts, query, c) for c in args.concurrency for facts in sizes
            for query in (True, False)]
    with running(stub_argv(stub_port), api_env(servers), stub_url, "/_stub/requests"):
        print(f"seeding {args.users} users x 50 and x 1,000 facts through the stub ...",
              file=sys.stderr)
        asyncio.run(seed(settings, {u: n for n, us in sizes.items() for u in us}))
        key = asyncio.run(read_key(servers.database_url))
        with running(api_argv(api_port, workers=args.workers), api_env(servers, **embeddings),
                     api_url, "/healthz"):
            return asyncio.run(measure(api_url, stub_url, key, rows, sizes, args.requests,
                                       args.rounds, args.warmup, args.client))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prompt_read", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="reads per row")
    parser.add_argument("--rounds", type=int, default=4, help="rounds over the rows")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured reads per row first")
    parser.add_argument("--users", type=int, default=4, help="users of each size")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1],
                        help="reads in flight (one client, keep-alive)")
    parser.add_argument("--workers", type=int, default=1, help="API server processes")
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw",
                        help="raw: bench.lib.raw_http (the server's figure); httpx: as a Python"
                             " chat server reads, about 0.8 ms more CPU per read")
    args = parser.parse_args(argv)
    with throwaway_servers(durable=False) as servers:
        asyncio.run(migrate(servers.database_url, embed_dim=DIM))
        results = run(servers, args)
    print(f"{args.workers} API process(es); {args.users} users of each size; read_top_k 50;"
          f" the {args.client} client;"
          f" load {load_1min()} at the end.")
    print()
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
