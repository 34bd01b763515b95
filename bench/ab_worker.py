"""One worker process of ``bench.version_ab``, run in one checkout's root.

    cd CHECKOUT && PYTHONPATH=. python -m bench.ab_worker QUEUE OUT.json

``worker`` and ``bench`` are that checkout's. version_ab copies this file into
an older checkout, so it runs the code of any revision whose bench has
``make_worker``, ``PoolCounter`` and ``install_recorder``. Settings come from the MEMFLEET_*
environment. The worker is the bench's instrumented one (poll 0.05 s); each
finished job is announced on the Redis list ``bench:ab:done:QUEUE``, after its
timing has been taken. On SIGTERM it stops between polls and writes
``{job_id: {"infra_ms": ..., "stages": {...}}}`` to OUT.json.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench import phases
from bench.probes import install_recorder
from worker import app
from worker.config import Settings
from worker.telemetry import configure_logging

READY_PREFIX = "bench:ab:ready:"
DONE_PREFIX = "bench:ab:done:"


async def serve(queue: str, out: Path) -> None:
    settings = Settings(queue_name=queue)
    recorder = install_recorder()
    worker = phases.make_worker(settings, recorder, phases.PoolCounter(), burst=False,
                                poll_delay=0.05, handle_signals=False)
    announce = Redis.from_url(settings.redis_url or "")
    timed_run_job = worker.run_job

    async def run_job(job_id: str, score: int) -> None:
        await timed_run_job(job_id, score)  # timed inside; the announcement is not
        await announce.lpush(DONE_PREFIX + queue, job_id)

    worker.run_job = run_job  # type: ignore[method-assign]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    main = asyncio.create_task(worker.main())
    try:
        while "deps" not in worker.ctx:
            if main.done():
                main.result()  # start-up failed: raise its error
            await asyncio.sleep(0.01)
        await announce.lpush(READY_PREFIX + queue, "ready")
        await stop.wait()
        await worker.stop_polling(main)
    finally:
        await worker.close()
        await announce.aclose()
    _write(out, recorder, worker)


def _write(out: Path, recorder: Any, worker: Any) -> None:
    result: dict[str, Any] = {}
    for job_id, job in recorder.jobs.items():
        run = worker.run_ns.get(job_id)
        if run is not None:
            result[job_id] = {"infra_ms": (run[1] - run[0]) / 1e6 - sum(job.provider.values()),
                              "stages": job.stages}
    out.write_text(json.dumps(result))


def main() -> int:
    configure_logging("WARNING")
    # The loop this revision's `memfleet worker` runs on (asyncio's before it chose).
    loop_factory = getattr(app, "new_event_loop", asyncio.new_event_loop)
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve(sys.argv[1], Path(sys.argv[2])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
