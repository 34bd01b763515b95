"""One worker process of ``bench.ab.version_ab``: one revision's worker, timed by its spans.

    cd KIT && PYTHONPATH=KIT:CHECKOUT python -m bench.ab.ab_worker --sessions N

KIT holds a copy of this checkout's bench/ package and nothing else, so
``worker`` is CHECKOUT's, whichever revision that is, and CHECKOUT's own bench/
is never imported. Only the worker's public functions are used (bench.lib.jobs).
Settings come from the MEMFLEET_* environment: a database and a Redis db of
this process's own.

It migrates its database with its revision's migrate, seeds users and session
histories through its revision's client and workers, pushes ``{"ready": ...}``
to ``bench:ab:done``, then serves: for every session index popped from
``bench:ab:go`` it hands that session's slice over, waits for ARQ's
after_job_end and pushes the job's timing (bench.lib.spans) as JSON to
``bench:ab:done``. "stop" ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence

from redis.asyncio import Redis

from bench.lib import jobs, workload
from bench.lib.spans import JobSpans
from bench.lib.worker_entry import build_worker, new_event_loop
from worker.config import Settings
from worker.store.migrate import migrate
from worker.telemetry import configure_logging, setup_telemetry

GO_KEY = "bench:ab:go"
DONE_KEY = "bench:ab:done"
POLL_DELAY_S = 0.05  # as bench.run's one-at-a-time run
IDLE_EXIT_S = 900  # nothing to do for this long: the driver is gone


async def serve(args: argparse.Namespace) -> None:
    settings = Settings()
    database_url, redis_url = settings.database_url or "", settings.redis_url or ""
    spans = JobSpans()
    telemetry = setup_telemetry(settings, span_exporter=spans)
    redis = Redis.from_url(redis_url)
    plans = list(workload.sessions(args.seed, args.users, args.sessions))
    try:
        await migrate(database_url, embed_dim=settings.embed_dim)
        await jobs.seed(redis, settings, telemetry, seed=args.seed, users=args.users,
                        plans=plans)
        active = await jobs.settle(database_url)
        spans.jobs.clear()
        finished = jobs.Finished()
        worker = build_worker(settings, telemetry=telemetry, poll_delay=POLL_DELAY_S,
                              handle_signals=False, after_job_end=finished)
        main = asyncio.create_task(worker.main())
        try:
            await redis.lpush(DONE_KEY, json.dumps({"ready": active}))
            while True:
                popped = await redis.blpop([GO_KEY], timeout=IDLE_EXIT_S)
                if popped is None or popped[1] == b"stop":
                    break
                handed = await jobs.hand_over(redis, settings, plans[int(popped[1])])
                await finished.wait(handed.job_id, main)
                await redis.lpush(DONE_KEY, json.dumps(spans.jobs[handed.job_id].as_json()))
            await jobs.stop(worker, main)
        finally:
            await jobs.close(worker, main)
    finally:
        await redis.aclose()
        telemetry.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab.ab_worker")
    parser.add_argument("--sessions", type=int, required=True)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
