"""Throwaway PostgreSQL and Redis for one bench run, stopped and deleted whatever happens."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from worker.embedded import EmbeddedPostgres, EmbeddedRedis
from worker.store.fence_key import embedded_key


@dataclass(frozen=True, slots=True)
class Servers:
    database_url: str
    redis_url: str
    durable: bool
    root: Path


# Enough to hold the seeded fact table in memory, as a production server sized for its
# users' active facts would (docs/bench.md: the default 128MB does not).
SHARED_BUFFERS = "512MB"


@contextlib.contextmanager
def throwaway_servers(*, durable: bool) -> Iterator[Servers]:
    root = Path(tempfile.mkdtemp(prefix="memfleet-bench-"))
    postgres = EmbeddedPostgres(root / "postgres", durable=durable,
                                settings={"shared_buffers": SHARED_BUFFERS})
    redis = EmbeddedRedis(root / "redis")
    try:
        # Started inside the try: a half-started pair is still stopped below.
        database_url = postgres.start()
        redis_url = redis.start()
        # The erase fence key of every process of the bench (their home is root/home).
        (root / "home").mkdir(exist_ok=True)
        embedded_key(root / "home")
        yield Servers(database_url, redis_url, durable, root)
    finally:
        # Each stop is attempted even when the other fails; the directory goes last.
        with contextlib.suppress(Exception):
            redis.stop()
        with contextlib.suppress(Exception):
            postgres.stop()
        for server in (redis, postgres):
            if server.is_running():  # a stop that failed: do not leave a daemon behind
                with contextlib.suppress(Exception):
                    server.kill()
        shutil.rmtree(root, ignore_errors=True)
