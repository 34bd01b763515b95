"""What an adapter writes: the payload and the ARQ job byte for byte, the hand-over
ids, the session's stand-in (docs/protocol.md, "The payload", "The messages text",
"The ARQ job", "Conventions", "The commit events")."""

from __future__ import annotations

from conformance.context import CheckFailed, Context
from conformance.reference import (
    JOB_ID,
    Mismatch,
    expected_job,
    expected_payload,
    first_difference,
    session_tag,
)
from conformance.registry import check
from conformance.stack import IDLE_QUEUE
from worker.protocol import keys
from worker.protocol.keys import SessionRef

# Every escape the messages text knows, text beyond ASCII (Latin, typographic quotes,
# CJK, an astral emoji), and all four roles.
TRICKY_MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": 'I said "hi" \\ back\\slash\ttab\nnew line\r\nend'},
    {"role": "assistant", "content": "Café — “quoted” 日本語 😀 naïve"},
    {"role": "tool", "content": "{\"k\": [1, 2]} </script> \u2028 done"},
]


async def _compare_payload(ctx: Context, user_id: str, session_id: str, **optional: object
                           ) -> bytes:
    await ctx.handover(user_id, session_id, TRICKY_MESSAGES, session="idle", **optional)
    raw = await ctx.stored(user_id, session_id)
    if raw is None:
        raise CheckFailed("no payload stored under memfleet:handover:{<user>}:<session id>")
    try:
        want = expected_payload(raw, user_id=user_id, session_id=session_id,
                                messages=TRICKY_MESSAGES, **optional)  # type: ignore[arg-type]
    except Mismatch as exc:
        raise CheckFailed(str(exc)) from None
    if raw != want:
        raise CheckFailed("the payload is not the protocol's bytes: "
                          + first_difference(raw, want))
    return raw


@check("payload_bytes_exact")
async def payload_bytes_exact(ctx: Context) -> None:
    """The stored payload is byte for byte what the reference client writes.

    docs/protocol.md, "The payload" and "The messages text": compact JSON, fields
    v, session_id, user_id, messages, handed_over_at, trace in that order; each
    message {"role","content"}, role first; only ", \\, tab, newline and CR escaped,
    all other text as itself in UTF-8; no agent_id or listed_at_us when not given.
    Ids with a quote, a backslash, braces and text beyond ASCII."""
    await _compare_payload(ctx, f'{ctx.user()}"{{ü}}\\', 'sess "1"\\é')


@check("payload_optional_fields")
async def payload_optional_fields(ctx: Context) -> None:
    """agent_id and listed_at_us travel in the payload, last and in that order.

    docs/protocol.md, "The payload": written only when given, after trace."""
    user_id = ctx.user()
    seconds, micros = await ctx.redis.time()
    listed = int(seconds) * 1_000_000 + int(micros)
    raw = await _compare_payload(ctx, user_id, "s-agent", agent_id="coach “ü”",
                                 listed_at_us=listed)
    tail = f',"agent_id":"coach “ü”","listed_at_us":{listed}}}'.encode()
    if not raw.endswith(tail):
        raise CheckFailed(f"the payload ends {raw[-60:]!r}, not {tail!r}")


@check("job_json_exact")
async def job_json_exact(ctx: Context) -> None:
    """The ARQ job is the documented JSON, under a job id of the documented form.

    docs/protocol.md, "The ARQ job": {"t":null,"f":"persist_session_memory","a":[],
    "k":{"user_id":...,"session_id":...},"et":<ms>} compact, strings escaped as in
    the messages text; the id memfleet- and 32 hex digits; the job listed in the
    queue and named by the session's queued marker."""
    user_id, session_id = f'{ctx.user()}"é\\', "s:1"
    result = await ctx.handover(user_id, session_id, TRICKY_MESSAGES[:2], session="idle")
    marker = await ctx.redis.get(SessionRef(user_id, session_id).queued_key)
    if marker is None:
        raise CheckFailed("no queued marker (memfleet:queued:...) names the session's job")
    job_id = marker.decode()
    if not JOB_ID.fullmatch(job_id):
        raise CheckFailed(f"job id {job_id!r} is not memfleet- and 32 hex digits")
    if result["job_id"] not in (None, job_id) or (ctx.transport == "redis"
                                                  and result["job_id"] != job_id):
        raise CheckFailed(f"job_id {result['job_id']!r} is not the queued job {job_id!r}")
    if await ctx.redis.zscore(IDLE_QUEUE, job_id) is None:
        raise CheckFailed(f"job {job_id} is not in the queue {IDLE_QUEUE}")
    raw = await ctx.redis.get(keys.arq_job_key(job_id))
    if raw is None:
        raise CheckFailed(f"no arq:job:{job_id}")
    try:
        want = expected_job(raw, user_id, session_id)
    except Mismatch as exc:
        raise CheckFailed(str(exc)) from None
    if raw != want:
        raise CheckFailed("the job is not the protocol's bytes: " + first_difference(raw, want))


@check("handover_ids_increase")
async def handover_ids_increase(ctx: Context) -> None:
    """Each hand-over of a session gets a larger id, and status's latest is the last.

    docs/protocol.md, "Conventions" (numbers from the Redis clock, made unique per
    session) and "Status and read-your-writes"."""
    user_id = ctx.user()
    ids = []
    for n in range(1, 5):
        turn = [{"role": "user", "content": f"message {i}"} for i in range(n)]
        ids.append((await ctx.handover(user_id, "s", turn, session="idle"))["handover_id"])
    if ids != sorted(set(ids)):
        raise CheckFailed(f"ids {ids} do not increase")
    status = await ctx.call({"op": "status", "user_id": user_id, "session_id": "s"},
                            session="idle")
    want = {"latest": ids[-1], "finished": 0, "older_lists": 0}
    if {k: status.get(k) for k in want} != want:
        raise CheckFailed(f"status {status} is not {want}")


@check("session_tag_hmac")
async def session_tag_hmac(ctx: Context) -> None:
    """session_tag is the first 16 hex digits of HMAC-SHA-256 over the session key.

    docs/protocol.md, "The commit events" and "Users, sessions and their hash tag":
    the key is {<user escaped>}:<session id>, % then { then } escaped."""
    for user_id, session_id in (("alice", "1"), ("a{b}%c", "s:1"), ("ü%7B", "{x}")):
        result = await ctx.call({"op": "session_tag", "user_id": user_id,
                                 "session_id": session_id})
        want = session_tag(user_id, session_id, ctx.stack.telemetry_id_key)
        if result.get("tag") != want:
            raise CheckFailed(f"tag of ({user_id!r}, {session_id!r}) is {result.get('tag')!r},"
                              f" want {want!r}")
