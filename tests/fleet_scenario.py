"""The fleet scenario shared by the fleet test and the chaos run: sessions that state
facts turn by turn (and change one), handed over turn by turn, and the checks that
every message counted exactly once.

Every third session's chat server summarises: from turn SUMMARY_TURN on, the
list it hands over starts with a summary instead of the earlier turns. A turn
that no commit finished before that is only in the session's older list
(worker.protocol.queue's backlog), and must still be remembered.

Every user numbers their two sessions alike ("chat0", "chat1"), as many chat
products do: every session id is shared by all users at once, and each must
still end with exactly their own facts."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

import asyncpg
from redis.asyncio import Redis

from tests.helpers import bot_msg, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.errors import HandoverUnavailable
from worker.pipeline.cursor import window_hash
from worker.protocol import keys, queue
from worker.protocol.payload import Message, message_hash

TURNS = 5
SUMMARY_TURN = 3
SUMMARY = {"role": "system", "content": "Summary: the earlier turns, condensed."}


def user_of(session: int) -> str:
    return f"user{session // 2}"  # two sessions per user, talking at the same time


def session_of(session: int) -> str:
    # Every user numbers their sessions alike: all users share these two ids.
    return f"chat{session % 2}"


def key_of(session: int) -> tuple[str, str]:
    return user_of(session), session_of(session)


def conversation(s: int) -> list[dict[str, str]]:
    said = [
        f"I use tool{s}a.",
        f"I use lib{s}x.",
        "ok",  # repeats in every session and turn
        f"We switched from tool{s}a to tool{s}b.",
        f"I like dish{s}.",
    ]
    out: list[dict[str, str]] = []
    for line in said[:TURNS]:
        out += [user_msg(line), bot_msg("ok")]
    return out


def summarises(s: int) -> bool:
    return s % 3 == 0


def handed_over(s: int, turn: int) -> list[dict[str, str]]:
    """The list the chat server hands over after ``turn``."""
    msgs = conversation(s)[: 2 * turn]
    if summarises(s) and turn >= SUMMARY_TURN:
        return [SUMMARY, *msgs[2 * (SUMMARY_TURN - 1):]]
    return msgs


def expected_processed(s: int) -> int:
    """Messages committed in all: every turn once, and the summary once."""
    return 2 * TURNS + (1 if summarises(s) else 0)


def final_cursor(s: int) -> tuple[int, str]:
    """(position, window hash) of the cursor once the session's last list is done."""
    hashes = [message_hash(Message.model_validate(m)) for m in handed_over(s, TURNS)]
    return len(hashes) - 1, window_hash(hashes, len(hashes) - 1)


def expected_active(s: int) -> set[str]:
    return {f"Uses tool{s}b", f"Uses lib{s}x", f"Likes dish{s}"}


@dataclass
class HandOvers:
    planned: int = 0  # hand-overs the chat servers made (re-hand-overs included)
    taken: int = 0  # hand-overs Redis took
    refused: int = 0  # refused by Redis (down) and handed over again
    kept_older: int = 0  # the previous list was kept in the backlog, unfinished


async def hand_over_turn_by_turn(
    redis: Redis, seed: int, sessions: int, pause_s: tuple[float, float] = (0.4, 0.9)
) -> HandOvers:
    """Hand every session over turn by turn; a hand-over Redis refused is handed over
    again, as a chat server's next turn would."""
    rng = random.Random(seed)
    counts = HandOvers()
    for turn in range(1, TURNS + 1):
        calls = []
        for s in range(sessions):
            upto = handed_over(s, turn)
            # A generous timeout: this test is about exactly-once, not hand-over latency,
            # and 260 concurrent calls on a loaded 2-core machine can exceed the 1 s default.
            calls.append((s, upto))
            if rng.random() < 0.3:  # a concurrent re-hand-over of the same list
                calls.append((s, upto))
        rng.shuffle(calls)
        counts.planned += len(calls)
        pending = calls
        while pending:
            results = await asyncio.gather(*(
                schedule_memory_persistence(redis, session_of(s), user_of(s), upto, timeout_s=30)
                for s, upto in pending), return_exceptions=True)
            failed = [call for call, r in zip(pending, results, strict=True)
                      if isinstance(r, HandoverUnavailable)]
            counts.taken += sum(1 for r in results if isinstance(r, queue.Enqueued))
            counts.kept_older += sum(1 for r in results
                                     if isinstance(r, queue.Enqueued) and r.kept_older)
            others = [r for r in results if isinstance(r, BaseException)
                      and not isinstance(r, HandoverUnavailable)]
            if others:
                raise others[0]
            counts.refused += len(failed)
            pending = failed
            if pending:
                await asyncio.sleep(0.5)
        await asyncio.sleep(rng.uniform(*pause_s))
    return counts


async def wait_for_workers(redis: Redis, workers: int) -> None:
    """Every worker has started: each has written its heartbeat (worker.fleet.probe, at the
    end of its start-up) and the three warm-up sessions were taken by jobs."""
    for i in range(3):
        await schedule_memory_persistence(redis, f"warmup{i}", "warmup", [user_msg("hi")])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (await redis.zcard("memfleet:queue") == 0
                and await redis.hlen(keys.workers_key("memfleet:queue")) >= workers):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the workers did not start")


async def waiting_jobs(redis: Redis) -> list[bytes]:
    """Jobs in the queue that no worker holds. A job a killed worker held stays in
    ARQ's queue behind its in-progress key until a recovery pass retires it (once its
    session has run again, worker.fleet.orphans); it is not work still to do."""
    queued = await redis.zrange("memfleet:queue", 0, -1)
    held = [await redis.exists(keys.ARQ_IN_PROGRESS_PREFIX + j.decode()) for j in queued]
    return [j for j, h in zip(queued, held, strict=True) if not h]


@dataclass
class Drained:
    caught_up_s: float  # every session's cursor at its last message
    drained_s: float  # and no job left waiting (retries and deferrals that find nothing)


async def wait_until_done(
    db: asyncpg.Connection, redis: Redis, timeout_s: float, sessions: int
) -> Drained:
    """Wait until every session's cursor is at its last message and no job waits."""
    started = time.monotonic()
    deadline = time.monotonic() + timeout_s
    expected = {key_of(s): final_cursor(s) for s in range(sessions)}
    done = 0
    caught_up: float | None = None
    while time.monotonic() < deadline:
        rows = await db.fetch("SELECT user_id, session_id, position, window_hash"
                              " FROM session_cursor WHERE user_id LIKE 'user%'")
        done = sum(1 for r in rows if expected.get((r["user_id"], r["session_id"]))
                   == (r["position"], r["window_hash"]))
        if done == sessions and caught_up is None:
            caught_up = time.monotonic() - started
        if caught_up is not None and not await waiting_jobs(redis):
            return Drained(caught_up, time.monotonic() - started)
        await asyncio.sleep(0.5)
    raise AssertionError(f"only {done} of {sessions} sessions done in {timeout_s}s")


async def assert_exactly_once(db: asyncpg.Connection, sessions: int) -> None:
    # 1. Every message was in exactly one committed slice.
    per_session = await db.fetch(
        "SELECT user_id, session_id, sum(slice_len) AS n FROM memory_run"
        " WHERE outcome = 'committed' GROUP BY user_id, session_id"
    )
    processed = {(r["user_id"], r["session_id"]): r["n"] for r in per_session
                 if r["user_id"] != "warmup"}
    assert processed == {key_of(s): expected_processed(s) for s in range(sessions)}
    # Nothing refused: no run found a list it could not take (sessions share ids).
    refused = await db.fetchval("SELECT count(*) FROM memory_run WHERE outcome = 'invalid'")
    assert refused == 0
    # 2. Every fact stored once: 3 active + 1 superseded per session, nothing more.
    for s in range(sessions):
        rows = await db.fetch(
            "SELECT id, text, superseded_at, superseded_by FROM memory_fact"
            " WHERE user_id = $1 AND source_session_id = $2",
            user_of(s), session_of(s),
        )
        active = [r["text"] for r in rows if r["superseded_at"] is None]
        assert sorted(active) == sorted(expected_active(s)), s
        old = [r for r in rows if r["superseded_at"] is not None]
        assert [r["text"] for r in old] == [f"Uses tool{s}a"], s
        new_id = {r["text"]: r["id"] for r in rows}[f"Uses tool{s}b"]
        assert old[0]["superseded_by"] == new_id
    # 3. No duplicate active fact for any user.
    dupes = await db.fetch(
        "SELECT user_id, text FROM memory_fact WHERE superseded_at IS NULL"
        " GROUP BY user_id, text HAVING count(*) > 1"
    )
    assert dupes == []
    # 4. Chains are consistent: same user, newer row, never dangling.
    broken = await db.fetchval(
        "SELECT count(*) FROM memory_fact old JOIN memory_fact new ON new.id = old.superseded_by"
        " WHERE new.user_id <> old.user_id OR new.id <= old.id OR old.superseded_at IS NULL"
    )
    assert broken == 0


