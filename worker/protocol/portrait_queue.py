"""The user's portrait refreshes in Redis: debounced, one queued per user (docs/portrait.md).

A commit that changed a user's facts counts toward their next refresh
(``note_commit``); the refresh is an ARQ job of its own (``refresh_user_portrait``,
worker.fleet.portrait_job) on the fleet's queue, written here through
worker.protocol.queue's job format. Per user, in ``memfleet:portrait:{<user>}`` (a
hash): ``c`` the commits since the last refresh started, ``t`` when it started (ms,
Redis clock), ``j`` the id of the refresh waiting in the queue.

When a refresh is due is ``refresh_due_ms``, a pure function of those: at once for a
user who never had one, or once ``max_commits`` commits came since the last; else a
full ``min_interval_ms`` after the last one started. A commit while a refresh waits in
the queue joins it (it is brought forward when due sooner); one after a refresh
started queues the next. So K commits within the interval cost one refresh, and a
user who keeps talking gets at most one per interval, or per ``max_commits``.

``facts_changed`` is the one entry for a change of the user's facts, whoever made it:
a job's commit (worker.fleet.portrait_job) and a manual write through the memory API
(worker.api.portrait_due) count alike, with the fleet's settings.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import structlog

from worker.config import Settings
from worker.protocol.keys import (
    ARQ_IN_PROGRESS_PREFIX,
    ARQ_JOB_PREFIX,
    user_jobs_key,
    user_portrait_key,
)
from worker.protocol.queue import JOB_EXPIRES_MS, PAYLOAD_TTL_MS, portrait_job_bytes
from worker.protocol.replies import as_text
from worker.protocol.scripts import LuaScript

_NOTE = LuaScript("worker.protocol.lua", "portrait_note.lua")
_QUEUE = LuaScript("worker.protocol.lua", "portrait_queue.lua")
_CLAIM = LuaScript("worker.protocol.lua", "portrait_claim.lua")
MS_PER_MINUTE = 60_000

log = structlog.get_logger("memfleet.portrait")


@dataclass(frozen=True, slots=True)
class PortraitPace:
    """How often one user's portrait may be refreshed (MEMFLEET_PORTRAIT_MIN_INTERVAL,
    in minutes, and MEMFLEET_PORTRAIT_MAX_COMMITS)."""

    min_interval_ms: int = 10 * MS_PER_MINUTE
    max_commits: int = 20

    @classmethod
    def of(cls, min_interval_minutes: float, max_commits: int) -> PortraitPace:
        return cls(int(min_interval_minutes * MS_PER_MINUTE), max_commits)

    @classmethod
    def of_settings(cls, settings: Settings) -> PortraitPace:
        return cls.of(settings.portrait_min_interval, settings.portrait_max_commits)


def refresh_due_ms(now_ms: int, last_ms: int | None, commits: int, pace: PortraitPace) -> int:
    """When the next refresh is due (ms): now for a user whose last refresh is unknown
    or who made ``max_commits`` commits since it, else ``min_interval_ms`` after it
    (now, if that has passed)."""
    if last_ms is None or commits >= pace.max_commits:
        return now_ms
    return max(now_ms, last_ms + pace.min_interval_ms)


@dataclass(frozen=True, slots=True)
class Noted:
    job_id: str  # the refresh that will take this commit
    due_ms: int  # when it is due at the latest
    joined: bool  # a refresh already waiting took it (a debounced commit)


async def note_commit(redis: Any, user_id: str, pace: PortraitPace, queue_name: str, *,
                      due_ms: int | None = None) -> Noted:
    """Count a commit toward the user's next refresh and make sure one is queued by when
    it is due; ``due_ms``: due then instead, not counting a commit (the user asked for
    a portrait, or a refresh that could not run now queues itself again)."""
    if due_ms is None:
        commits, last, now = await _NOTE(redis, [user_portrait_key(user_id)], [PAYLOAD_TTL_MS])
        due_ms = refresh_due_ms(int(now), None if int(last) < 0 else int(last), int(commits),
                                pace)
    job_id = f"memfleet-{uuid.uuid4().hex}"
    expires_ms = JOB_EXPIRES_MS + max(0, due_ms - int(time.time() * 1000))
    taken, state = await _QUEUE(
        redis, [user_portrait_key(user_id), queue_name, user_jobs_key(user_id)],
        [job_id, portrait_job_bytes(user_id, int(time.time() * 1000)), due_ms, expires_ms,
         ARQ_JOB_PREFIX, ARQ_IN_PROGRESS_PREFIX, PAYLOAD_TTL_MS])
    return Noted(as_text(taken), due_ms, int(state) != 1)


async def facts_changed(redis: Any, user_id: str, settings: Settings) -> Noted | None:
    """A change to the user's facts committed (call it after its transaction): counted
    toward their next refresh, debounced, when the fleet writes portraits. None while it
    does not, or when Redis failed: best effort, logged by the error's type alone; the
    change stands and the user's next change queues the refresh."""
    if not settings.portrait_enabled:
        return None
    try:
        return await note_commit(redis, user_id, PortraitPace.of_settings(settings),
                                 settings.queue_name)
    except Exception as exc:  # noqa: BLE001 - see above: never the change's failure
        log.warning("portrait refresh not queued", error=type(exc).__name__)
        return None


async def claim(redis: Any, user_id: str, job_id: str) -> int:
    """The refresh ``job_id`` starts: commits from now on count toward the next one.
    Returns when it started (ms, Redis clock)."""
    started: int = await _CLAIM(redis, [user_portrait_key(user_id)], [job_id, PAYLOAD_TTL_MS])
    return int(started)
