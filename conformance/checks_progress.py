"""After a real worker commits: status, wait, the commit events and the facts
(docs/protocol.md, "Status and read-your-writes", "The commit events")."""

from __future__ import annotations

import time
from typing import Any

from conformance.context import CheckFailed, Context
from conformance.reference import session_tag
from conformance.registry import check
from worker.protocol.keys import SessionRef

COMMIT_WITHIN_S = 20.0
SAID = [{"role": "user", "content": "I live in Berlin."},
        {"role": "assistant", "content": "Noted."}]
SAID_MORE = [*SAID, {"role": "user", "content": "I work as a baker."},
             {"role": "assistant", "content": "Nice."}]
# The stub's extraction of SAID_MORE (api_stub/llm_stub.py: the offline rules).
FACTS = ["Lives in Berlin", "Works as baker"]
STATUS_KEYS = ("latest", "finished", "older_lists")


async def _status(ctx: Context, user_id: str, session_id: str) -> dict[str, Any]:
    status = await ctx.call({"op": "status", "user_id": user_id, "session_id": session_id})
    if not all(isinstance(status.get(k), int) for k in STATUS_KEYS):
        raise CheckFailed(f"status {status} lacks integer {', '.join(STATUS_KEYS)}")
    return status


async def _committed(ctx: Context, user_id: str, session_id: str,
                     messages: list[dict[str, str]]) -> int:
    """Hand ``messages`` over on the live queue; wait until a commit covers them."""
    handover_id: int = (await ctx.handover(user_id, session_id, messages))["handover_id"]
    result = await ctx.call({"op": "wait", "user_id": user_id, "session_id": session_id,
                             "handover_id": handover_id, "timeout_s": COMMIT_WITHIN_S},
                            timeout_s=COMMIT_WITHIN_S + 5)
    if result.get("covered") is not True:
        raise CheckFailed(f"wait answered {result} for a hand-over the worker takes"
                          f" (not covered within {COMMIT_WITHIN_S:g} s)")
    return handover_id


@check("wait_covers_after_commit")
async def wait_covers_after_commit(ctx: Context) -> None:
    """wait answers covered true once a worker committed the hand-over, and status
    then says finished >= the id, no older lists, latest the id.

    docs/protocol.md, "Status and read-your-writes"."""
    user_id = ctx.user()
    handover_id = await _committed(ctx, user_id, "s", SAID)
    status = await _status(ctx, user_id, "s")
    if not (status["finished"] >= handover_id and status["older_lists"] == 0
            and status["latest"] == handover_id):
        raise CheckFailed(f"status {status} after hand-over {handover_id} was covered")


@check("wait_times_out")
async def wait_times_out(ctx: Context) -> None:
    """wait on an id no commit covers answers covered false when its timeout passes,
    not before and not much after; a session never handed over reads as zeros.

    docs/protocol.md, "Status and read-your-writes"."""
    user_id = ctx.user()
    status = await _status(ctx, user_id, "never")
    if {k: status[k] for k in STATUS_KEYS} != dict.fromkeys(STATUS_KEYS, 0):
        raise CheckFailed(f"status of a session never handed over is {status}")
    handover_id = (await ctx.handover(user_id, "s", SAID, session="idle"))["handover_id"]
    timeout_s = 0.8
    started = time.monotonic()
    result = await ctx.call({"op": "wait", "user_id": user_id, "session_id": "s",
                             "handover_id": handover_id + 10**12, "timeout_s": timeout_s},
                            session="idle", timeout_s=timeout_s + 5)
    took = time.monotonic() - started
    if result.get("covered") is not False:
        raise CheckFailed(f"wait on a far-future id answered {result}")
    if not timeout_s - 0.05 <= took <= timeout_s + 1.5:
        raise CheckFailed(f"wait with timeout_s {timeout_s} answered after {took:.2f} s")


@check("commit_event")
async def commit_event(ctx: Context) -> None:
    """A commit appends an event naming the session by its tag and covering the
    hand-over, with its outcome and counts; reading on after the last event with
    block_ms waits and finds nothing more of it.

    docs/protocol.md, "The commit events"."""
    user_id = ctx.user()
    handover_id = await _committed(ctx, user_id, "s", SAID)
    tag = session_tag(user_id, "s", ctx.stack.telemetry_id_key)
    result = await ctx.call({"op": "events", "after": "0", "count": 100_000,
                             "block_ms": None})
    events = result.get("events")
    if not isinstance(events, list):
        raise CheckFailed(f"events answered {result}")
    mine = [e for e in events if isinstance(e, dict) and e.get("session") == tag]
    fields = {"id": str, "session": str, "handover": int, "older_lists": int, "outcome": str,
              "added": int, "updated": int, "deleted": int, "at": int}
    for event in mine:
        if any(not isinstance(event.get(k), t) for k, t in fields.items()):
            raise CheckFailed(f"event {event} lacks fields of {list(fields)}")
    covering = [e for e in mine if e["handover"] >= handover_id and e["older_lists"] == 0]
    if not covering:
        raise CheckFailed(f"no event with session {tag} covers hand-over {handover_id}:"
                          f" {mine} of {len(events)}")
    event = covering[0]
    if event["outcome"] != "committed" or event["added"] < 1:
        raise CheckFailed(f"the covering event is {event}: want committed, added >= 1")
    if abs(time.time() * 1000 - event["at"]) > 120_000:
        raise CheckFailed(f"the event's at {event['at']} is not ms of now")
    last = events[-1]["id"]
    started = time.monotonic()
    later = await ctx.call({"op": "events", "after": last, "count": 10, "block_ms": 300})
    took = time.monotonic() - started
    found = later.get("events")
    if not isinstance(found, list) or any(e.get("session") == tag for e in found) \
            or (not found and took < 0.25):
        raise CheckFailed(f"events after {last} with block_ms 300 answered {later}"
                          f" after {took:.2f} s")


@check("facts_stored_once")
async def facts_stored_once(ctx: Context) -> None:
    """What the adapter handed over is committed as facts, once: an extended list adds
    only its new facts and the same list again adds none.

    docs/protocol.md, "Status and read-your-writes" (covered: committed and
    readable); the facts as the worker extracts them with the model stub."""
    user_id = ctx.user()
    await _committed(ctx, user_id, "s", SAID)
    await _committed(ctx, user_id, "s", SAID_MORE)
    await _committed(ctx, user_id, "s", SAID_MORE)
    db = await ctx.db()
    rows = await db.fetch("SELECT text FROM memory_fact WHERE user_id = $1"
                          " AND superseded_at IS NULL ORDER BY id", user_id)
    if (texts := [r["text"] for r in rows]) != FACTS:
        raise CheckFailed(f"the user's active facts are {texts}, want {FACTS}")


@check("wait_needs_older_lists")
async def wait_needs_older_lists(ctx: Context) -> None:
    """A hand-over is covered only when its list is finished AND no older list waits;
    status reports both.

    docs/protocol.md, "Status and read-your-writes" (covered: finished >= id and
    older == 0). The suite plays the fleet's half here, writing the meta's d and
    popping the backlog as release.lua would, so the case is certain."""
    user_id = ctx.user()
    await ctx.handover(user_id, "s", [{"role": "user", "content": "first history"}],
                       session="idle")
    latest = (await ctx.handover(user_id, "s", [{"role": "user", "content": "replaced"}],
                                 session="idle"))["handover_id"]
    ref = SessionRef(user_id, "s")
    await ctx.redis.hset(ref.meta_key, "d", str(latest))  # the latest list finished
    status = await ctx.call({"op": "status", "user_id": user_id, "session_id": "s"},
                            session="idle")
    want = {"latest": latest, "finished": latest, "older_lists": 1}
    if {k: status.get(k) for k in want} != want:
        raise CheckFailed(f"status {status}, want {want}")
    request = {"op": "wait", "user_id": user_id, "session_id": "s", "handover_id": latest,
               "timeout_s": 0.3}
    if (result := await ctx.call(request, session="idle")).get("covered") is not False:
        raise CheckFailed(f"wait answered {result} while an older list waits")
    await ctx.redis.lpop(ref.backlog_key)  # the older list finished too
    if (result := await ctx.call(request, session="idle")).get("covered") is not True:
        raise CheckFailed(f"wait answered {result} with every list finished")
