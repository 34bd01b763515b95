"""How lists meet in Redis: a growing list merges, a replaced one keeps the older
list, a long session goes as its newest window, a user's unfinished sessions are
capped (docs/protocol.md, "Handing over: enqueue.lua", "Ids, text and sizes")."""

from __future__ import annotations

import json

from conformance.adapter_process import AdapterError
from conformance.checks_payload import TRICKY_MESSAGES
from conformance.context import CheckFailed, Context
from conformance.registry import check
from conformance.stack import IDLE_QUEUE
from worker.protocol.keys import SessionRef

MORE = [{"role": "user", "content": "And “one” more\tthing"},
        {"role": "assistant", "content": "Sure — noted."}]


async def _backlog(ctx: Context, user_id: str, session_id: str) -> list[bytes]:
    entries: list[bytes] = await ctx.redis.lrange(
        SessionRef(user_id, session_id).backlog_key, 0, -1)
    return entries


async def _messages(ctx: Context, user_id: str, session_id: str) -> list[dict[str, str]]:
    raw = await ctx.stored(user_id, session_id)
    if raw is None:
        raise CheckFailed("no payload stored")
    messages: list[dict[str, str]] = json.loads(raw)["messages"]
    return messages


@check("merge_extends")
async def merge_extends(ctx: Context) -> None:
    """A list that extends the latest one replaces it: no older list, no second job.

    docs/protocol.md, "The messages text" (extends: the latest list's messages text
    is a prefix of the new one's) and "Handing over": both ways between the adapter
    and the reference client, with escapes and text beyond ASCII in the messages."""
    user_id = ctx.user()
    for first, session_id in (("reference", "ref-then-adapter"),
                              ("adapter", "adapter-then-ref")):
        ref = SessionRef(user_id, session_id)
        if first == "reference":
            await ctx.reference_handover(user_id, session_id, TRICKY_MESSAGES, IDLE_QUEUE)
        else:
            await ctx.handover(user_id, session_id, TRICKY_MESSAGES, session="idle")
        queued = await ctx.redis.get(ref.queued_key)
        if first == "reference":
            result = await ctx.handover(user_id, session_id, TRICKY_MESSAGES + MORE,
                                        session="idle")
            if result["kept_older"] or result["job_id"] is not None:
                raise CheckFailed(f"{session_id}: the extending list was not merged: {result}")
        else:
            await ctx.reference_handover(user_id, session_id, TRICKY_MESSAGES + MORE,
                                         IDLE_QUEUE)
        if backlog := await _backlog(ctx, user_id, session_id):
            raise CheckFailed(f"{session_id}: an extending list left {len(backlog)} older"
                              " list(s) in the backlog (messages written differently?)")
        if await ctx.redis.get(ref.queued_key) != queued:
            raise CheckFailed(f"{session_id}: a second job was queued for one session")
        if await _messages(ctx, user_id, session_id) != TRICKY_MESSAGES + MORE:
            raise CheckFailed(f"{session_id}: the stored list is not the extended one")


@check("older_lists_kept")
async def older_lists_kept(ctx: Context) -> None:
    """A list that does not extend the unfinished latest one moves that one to the
    backlog, oldest first, as <number>:<payload>.

    docs/protocol.md, "Keys" (What the values hold: backlog) and "Handing over"."""
    user_id, session_id = ctx.user(), "replaced"
    lists = [[{"role": "user", "content": f"history {n}, “take {n}”"}] for n in range(3)]
    ids, payloads, kept = [], [], []
    for messages in lists:
        result = await ctx.handover(user_id, session_id, messages, session="idle")
        ids.append(result["handover_id"])
        kept.append(result["kept_older"])
        payloads.append(await ctx.stored(user_id, session_id))
    if ctx.transport == "redis" and kept != [False, True, True]:
        raise CheckFailed(f"kept_older was {kept}, want [False, True, True]")
    want = [f"{ids[n]}:".encode() + (payloads[n] or b"") for n in range(2)]
    if (got := await _backlog(ctx, user_id, session_id)) != want:
        raise CheckFailed(f"the backlog is {got!r}, want {want!r}")
    status = await ctx.call({"op": "status", "user_id": user_id, "session_id": session_id},
                            session="idle")
    if status.get("older_lists") != 2 or status.get("latest") != ids[-1]:
        raise CheckFailed(f"status {status}: want older_lists 2, latest {ids[-1]}")


@check("long_session_window")
async def long_session_window(ctx: Context) -> None:
    """A session over max_messages, or over max_handover_bytes, is handed over as its
    most recent window that fits; nothing is refused.

    docs/protocol.md, "Ids, text and sizes": the oldest messages are dropped until
    the list has at most max_messages and the payload fits max_handover_bytes."""
    limits = ctx.stack.limits
    user_id = ctx.user()
    count = limits.max_messages + 7
    short = [{"role": "user", "content": f"turn {i}"} for i in range(count)]
    await ctx.handover(user_id, "by-count", short, session="idle")
    if await _messages(ctx, user_id, "by-count") != short[-limits.max_messages:]:
        raise CheckFailed(f"{count} messages were not cut to the newest {limits.max_messages}")
    # Characters beyond ASCII: the budget counts UTF-8 bytes, not characters.
    long = [{"role": "user", "content": f"{i:04d} " + "é" * 40 + "x" * 140}
            for i in range(limits.max_messages)]
    await ctx.handover(user_id, "by-bytes", long, session="idle")
    raw = await ctx.stored(user_id, "by-bytes") or b""
    kept = await _messages(ctx, user_id, "by-bytes")
    if len(raw) > limits.max_handover_bytes:
        raise CheckFailed(f"the payload is {len(raw)} bytes, over {limits.max_handover_bytes}")
    if not kept or kept != long[len(long) - len(kept):]:
        raise CheckFailed("the stored list is not the newest messages of the session")
    older = long[len(long) - len(kept) - 1]
    grown = len(raw) + len(json.dumps(older, ensure_ascii=False, separators=(",", ":"))) + 1
    if grown <= limits.max_handover_bytes:
        raise CheckFailed(f"the window of {len(kept)} messages is not the largest that fits")


@check("user_sessions_budget")
async def user_sessions_budget(ctx: Context) -> None:
    """One session more than max_user_sessions unfinished ones is refused with
    UserSessionsFull, storing nothing and keeping the others' lists.

    docs/protocol.md, "Ids, text and sizes" (the user) and "Handing over" (reply -3)."""
    user_id = ctx.user()
    cap = ctx.stack.limits.max_user_sessions
    turn = [{"role": "user", "content": "hello"}]
    for n in range(cap):
        await ctx.handover(user_id, f"s{n}", turn, session="idle")
    before = [await ctx.stored(user_id, f"s{n}") for n in range(cap)]
    try:
        result = await ctx.handover(user_id, "one-too-many", turn, session="idle")
    except AdapterError as exc:
        if exc.kind != "UserSessionsFull":
            raise CheckFailed(f"session {cap + 1} got {exc.kind}, want UserSessionsFull") from None
    else:
        raise CheckFailed(f"session {cap + 1} of the user was taken: {result}")
    await ctx.nothing_stored(user_id, "one-too-many")
    if [await ctx.stored(user_id, f"s{n}") for n in range(cap)] != before:
        raise CheckFailed("the refusal changed the user's other sessions")
