"""The ARQ jobs of dead workers, retired by the recovery pass.

A worker SIGKILLed mid-job leaves its jobs in ARQ's queue behind their
in-progress keys, which live the job timeout + 10 s (310 s by default). Their
sessions do not wait for them: the recovery pass queues each again within
seconds (worker.protocol.lock.recover_abandoned). But until the keys expire the
dead jobs count as queued work, a burst worker (`memfleet worker --burst`)
cannot end, and ARQ then runs each again to find nothing new.

So the recovery pass also retires them (worker/protocol/lua/retire_orphans.lua),
with the evidence the exporter's probe counts orphans by: a job in progress that
no live worker's heartbeat has listed for ``probe.ORPHAN_SLACK_MS`` (and that the
calling worker does not run itself), and only once its session is in neither the
pending nor the claimed set, that is once its recovery has been queued and run.
A live worker's job is never retired: it is listed by that worker's heartbeats,
and its session is claimed while it holds the lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from worker.fleet.probe import ORPHAN_SLACK_MS
from worker.protocol import keys
from worker.protocol.replies import as_text
from worker.protocol.scripts import ORPHANS, LuaScript

# Due jobs looked at for new suspects, from the queue's head, where ARQ picks
# (a suspect found once stays watched however far back it is).
MAX_DUE_LOOKED_AT = 1_000

_RETIRE = LuaScript("worker.protocol.lua", "retire_orphans.lua", after=[ORPHANS])


async def retire_orphans(
    redis: Any, queue_name: str, own_jobs: Iterable[str], *, slack_ms: int = ORPHAN_SLACK_MS,
) -> list[str]:
    """Retire the jobs of dead workers whose sessions owe nothing; return their ids.
    ``own_jobs``: the jobs the calling worker runs, never retired whatever its beats say."""
    raw = await _RETIRE(
        redis,
        [queue_name, keys.workers_key(queue_name), keys.suspects_key(queue_name),
         keys.pending_key(queue_name), keys.claimed_key(queue_name)],
        [keys.ARQ_IN_PROGRESS_PREFIX, keys.ARQ_JOB_PREFIX, keys.ARQ_RETRY_PREFIX, slack_ms,
         MAX_DUE_LOOKED_AT, ",".join(own_jobs)],
    )
    return [as_text(job) for job in raw]
