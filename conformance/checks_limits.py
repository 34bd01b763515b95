"""Refusals: bad input, an oversized message, a Redis that is away, a request the
adapter does not know (docs/protocol.md, "Ids, text and sizes", "Handing over")."""

from __future__ import annotations

import time
from typing import Any

from conformance.adapter_process import AdapterError
from conformance.context import CheckFailed, Context
from conformance.registry import check

UNAVAILABLE_WITHIN_S = 1.5
OK = {"role": "user", "content": "fine"}


def _invalid_inputs(max_id: int, max_chars: int) -> dict[str, dict[str, Any]]:
    """Each class of bad input, as the fields of a hand-over request."""
    def msgs(*messages: Any) -> dict[str, Any]:
        return {"messages": [OK, *messages]}
    return {
        "unknown role": msgs({"role": "robot", "content": "hi"}),
        "no role": msgs({"content": "hi"}),
        "no content": msgs({"role": "user"}),
        "content not a string": msgs({"role": "user", "content": 7}),
        "message not an object": msgs("hi"),
        "empty content": msgs({"role": "user", "content": ""}),
        "blank content": msgs({"role": "user", "content": " \n\t "}),
        "NUL in content": msgs({"role": "user", "content": "a\u0000b"}),
        "BEL in content": msgs({"role": "user", "content": "a\u0007b"}),
        "DEL in content": msgs({"role": "user", "content": "a\u007fb"}),
        "C1 control in content": msgs({"role": "user", "content": "a\u0085b"}),
        "lone surrogate in content": msgs({"role": "user", "content": "a\ud800b"}),
        f"content over {max_chars} characters": msgs(
            {"role": "user", "content": "x" * (max_chars + 1)}),
        "empty user_id": {"user_id": ""},
        "blank user_id": {"user_id": "   "},
        f"user_id over {max_id} characters": {"user_id": "u" * (max_id + 1)},
        "newline in user_id": {"user_id": "a\nb"},
        "empty session_id": {"session_id": ""},
        "DEL in session_id": {"session_id": "s\u007f"},
        "empty agent_id": {"agent_id": ""},
        "tab in agent_id": {"agent_id": "coach\t1"},
    }


@check("invalid_input_refused")
async def invalid_input_refused(ctx: Context) -> None:
    """Each class of bad input is InvalidHandover, and nothing is stored.

    docs/protocol.md, "Ids, text and sizes": ids not empty or blank, at most
    max_id_chars code points, no control character; messages {role, content} with a
    known role, content not blank, at most max_message_chars, valid UTF-8, no control
    character but tab, newline and CR. (A content over max_message_chars may also
    be answered HandoverTooLarge, the InvalidHandover for sizes.)"""
    limits = ctx.stack.limits
    faults = []
    for n, (name, fields) in enumerate(_invalid_inputs(limits.max_id_chars,
                                                       limits.max_message_chars).items()):
        request = {"user_id": ctx.user(), "session_id": f"bad-{n}", "messages": [OK], **fields}
        allowed = {"InvalidHandover"} | ({"HandoverTooLarge"} if "characters" in name
                                         and "content" in name else set())
        try:
            result = await ctx.call({"op": "handover", **request}, session="idle")
        except AdapterError as exc:
            if exc.kind not in allowed:
                faults.append(f"{name}: {exc.kind}")
        else:
            faults.append(f"{name}: taken ({result})")
            continue
        if isinstance(request["user_id"], str) and isinstance(request["session_id"], str) \
                and await ctx.stored(request["user_id"], request["session_id"]) is not None:
            faults.append(f"{name}: refused but stored")
    if faults:
        raise CheckFailed("not InvalidHandover: " + "; ".join(faults))


@check("message_too_large")
async def message_too_large(ctx: Context) -> None:
    """A message over max_message_bytes of UTF-8 is HandoverTooLarge, nothing stored;
    one of exactly max_message_bytes is taken.

    docs/protocol.md, "Ids, text and sizes" (bytes of UTF-8, not characters)."""
    limit = ctx.stack.limits.max_message_bytes
    user_id = ctx.user()
    over = "€" * (limit // 3 + 1)  # 3 bytes each: under max_message_chars, over the bytes
    try:
        result = await ctx.handover(user_id, "big", [OK, {"role": "user", "content": over}],
                                    session="idle")
    except AdapterError as exc:
        if exc.kind != "HandoverTooLarge":
            raise CheckFailed(f"{len(over.encode())} bytes got {exc.kind},"
                              " want HandoverTooLarge") from None
    else:
        raise CheckFailed(f"a message of {len(over.encode())} bytes was taken: {result}")
    await ctx.nothing_stored(user_id, "big")
    exact = "€" * (limit // 3) + "x" * (limit % 3)
    try:
        await ctx.handover(user_id, "exact", [{"role": "user", "content": exact}],
                           session="idle")
    except AdapterError as exc:
        raise CheckFailed(f"a message of exactly {limit} bytes got {exc.kind}") from None


@check("redis_unreachable")
async def redis_unreachable(ctx: Context) -> None:
    """With Redis away, a hand-over and a status are HandoverUnavailable within about
    1.5 s, never a hang.

    docs/protocol.md, "Handing over" (step 3: a timeout; the chat turn goes on)."""
    requests: list[dict[str, Any]] = [
        {"op": "handover", "user_id": ctx.user(), "session_id": "s", "messages": [OK]},
        {"op": "status", "user_id": ctx.user(), "session_id": "s"},
    ]
    await ctx.adapter("away")  # started and configured before the clock runs
    for request in requests:
        started = time.monotonic()
        try:
            result = await ctx.call(request, session="away", timeout_s=5)
        except AdapterError as exc:
            if exc.kind != "HandoverUnavailable":
                raise CheckFailed(f"{request['op']}: {exc.kind}, want HandoverUnavailable"
                                  ) from None
        else:
            raise CheckFailed(f"{request['op']} answered {result} with Redis away")
        took = time.monotonic() - started
        if took > UNAVAILABLE_WITHIN_S:
            raise CheckFailed(f"{request['op']}: HandoverUnavailable after {took:.2f} s,"
                              f" over {UNAVAILABLE_WITHIN_S} s")


@check("unknown_op_bad_request")
async def unknown_op_bad_request(ctx: Context) -> None:
    """A request the adapter does not know is BadRequest, and it answers on.

    docs/conformance.md, "The adapter protocol"."""
    try:
        result = await ctx.call({"op": "no-such-op"})
    except AdapterError as exc:
        if exc.kind != "BadRequest":
            raise CheckFailed(f"an unknown op got {exc.kind}, want BadRequest") from None
    else:
        raise CheckFailed(f"an unknown op answered {result}")
    await ctx.call({"op": "status", "user_id": ctx.user(), "session_id": "s"})
