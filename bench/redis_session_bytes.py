"""What one user can make Redis hold through the hand-over, whatever the client sends.

A throwaway Redis and no worker (nothing is ever finished: the worst case, as
with the workers down or scaled to zero). A client that keeps only what the
hand-over takes (as the chat stand-in does: a refused message is not kept)
sends, through ``schedule_memory_persistence`` with the default limits:

- ``long turns``: one session, ``--turns`` turns, each a user message of the
  longest the limits take, all astral characters (emoji), and a short reply;
  the whole list handed over every turn. The turns are kept as the chat
  stand-in keeps them (api_stub.chat_log: appended, taken back when the
  hand-over is refused for a full budget), and its list's MEMORY USAGE is the
  ``chat log B`` column (the stand-in's store, in the same Redis);
- ``replaced``: one session whose history is replaced every turn (a summary
  edited, then the turns again), growing, so no list extends the last;
- ``sessions``: ``--sessions`` sessions of one user, each a few long turns.

Each scenario is a user of its own.

For each: hand-overs taken and refused (by error), the MEMORY USAGE (SAMPLES 0)
of every key of the session (every session of the user for ``sessions``) and of
the user's keys, at its peak and at the end, the budget where there is one, and
the hand-over's latency at the first and last turn and its worst.

    python -m bench.redis_session_bytes [--turns 60] [--sessions 100]

It runs on a tree without the budgets too (for the before figure):
    PYTHONPATH=<tree> python <this file>
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from redis.asyncio import Redis

from api_stub.chat_log import ChatLog, session_key
from bench.lib.stats import table
from worker.client.handover import schedule_memory_persistence
from worker.errors import MemfleetError
from worker.memory_rules import Limits
from worker.protocol import keys
from worker.protocol.keys import SessionRef

EMOJI = "\U0001f600"


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_session_bytes",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--session-turns", type=int, default=4,
                        help="turns of each session in the sessions scenario")
    return parser.parse_args(argv)


def _longest_message(limits: Limits, tag: str) -> str:
    """The longest message of emoji the limits take (a tree without byte limits: chars)."""
    chars = limits.max_message_chars
    max_bytes = getattr(limits, "max_message_bytes", None)
    if max_bytes is not None:
        chars = min(chars, max_bytes // len(EMOJI.encode()))
    return (tag + " " + EMOJI * chars)[:chars]


async def _memory(redis: Redis, sessions: Sequence[SessionRef]) -> int:
    names = [key for session in sessions for key in session.state_keys]
    names += keys.user_keys(sessions[0].user_id)
    total = 0
    for key in names:
        total += int(await redis.memory_usage(key, samples=0) or 0)
    return total


@dataclass
class Outcome:
    name: str
    budget: str
    sent: int = 0
    taken: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    peak_bytes: int = 0
    end_bytes: int = 0
    first_ms: float = 0.0
    last_ms: float = 0.0
    worst_ms: float = 0.0
    chat_log_bytes: int | None = None

    def row(self) -> list[str]:
        refused = ", ".join(f"{n} {kind}" for kind, n in sorted(self.refused.items())) or "0"
        return [self.name, str(self.sent), str(self.taken), refused, f"{self.peak_bytes:,}",
                f"{self.end_bytes:,}", self.budget, f"{self.first_ms:.1f}",
                f"{self.last_ms:.1f}", f"{self.worst_ms:.1f}",
                "-" if self.chat_log_bytes is None else f"{self.chat_log_bytes:,}"]


async def _hand_over(redis: Redis, out: Outcome, session: SessionRef,
                     messages: list[dict[str, str]]) -> bool:
    out.sent += 1
    began = time.perf_counter()
    try:
        await schedule_memory_persistence(redis, session.session_id, session.user_id, messages,
                                          timeout_s=30)
        taken = True
        out.taken += 1
    except MemfleetError as exc:
        out.refused[type(exc).__name__] += 1
        taken = False
    ms = (time.perf_counter() - began) * 1000
    out.first_ms = out.first_ms or ms
    out.last_ms, out.worst_ms = ms, max(out.worst_ms, ms)
    return taken


def _budget(limits: Limits, name: str, scale: int = 1) -> str:
    value = getattr(limits, name, None)
    return "none" if value is None else f"{value * scale:,}"


async def _long_turns(redis: Redis, limits: Limits, turns: int) -> Outcome:
    session = SessionRef("mallory-long", "1")
    out = Outcome("long turns", _budget(limits, "max_session_bytes"))
    log = ChatLog(redis, max_messages=limits.max_messages, ttl_s=3600)
    for turn in range(turns):
        content, answer = _longest_message(limits, str(turn)), f"reply {turn}"
        # Bounded as the stand-in bounds it, where the tree can (max_bytes is new).
        bound = ({"max_bytes": limits.max_handover_bytes}
                 if "max_bytes" in inspect.signature(log.append_turn).parameters else {})
        history = await log.append_turn(session.user_id, session.session_id, content, answer,
                                         **bound)
        if not await _hand_over(redis, out, session, history):
            take_back = getattr(log, "take_back_turn", None)  # absent before the budgets
            if take_back is not None:
                await take_back(session.user_id, session.session_id, content, answer)
        out.peak_bytes = max(out.peak_bytes, await _memory(redis, [session]))
    out.end_bytes = await _memory(redis, [session])
    out.chat_log_bytes = int(await redis.memory_usage(
        session_key(session.user_id, session.session_id), samples=0) or 0)
    return out


async def _replaced(redis: Redis, limits: Limits, turns: int) -> Outcome:
    session = SessionRef("mallory-replaced", "1")
    out = Outcome("replaced", _budget(limits, "max_session_bytes"))
    long = _longest_message(limits, "x")
    for turn in range(turns):
        summary = {"role": "system", "content": f"Summary, version {turn}."}
        lines = [{"role": "user", "content": f"{n} {long}"[:len(long)]}
                 for n in range(turn + 1)]
        await _hand_over(redis, out, session, [summary, *lines])
        out.peak_bytes = max(out.peak_bytes, await _memory(redis, [session]))
    out.end_bytes = await _memory(redis, [session])
    return out


async def _sessions(redis: Redis, limits: Limits, count: int, turns: int) -> Outcome:
    sessions = [SessionRef("mallory-sessions", str(n)) for n in range(count)]
    per_user = getattr(limits, "max_user_sessions", None)
    budget = ("none" if per_user is None
              else _budget(limits, "max_session_bytes", per_user) + " (sessions x session)")
    out = Outcome("sessions", budget)
    long = _longest_message(limits, "s")
    for session in sessions:
        history = [{"role": "user", "content": f"{n} {long}"[:len(long)]} for n in range(turns)]
        await _hand_over(redis, out, session, history)
    out.peak_bytes = out.end_bytes = await _memory(redis, sessions)
    return out


async def _bench(args: argparse.Namespace, redis_url: str) -> tuple[list[list[str]], int]:
    redis = Redis.from_url(redis_url)
    limits = Limits()
    try:
        empty = int((await redis.info("memory"))["used_memory"])
        outcomes = [await _long_turns(redis, limits, args.turns),
                    await _replaced(redis, limits, args.turns),
                    await _sessions(redis, limits, args.sessions, args.session_turns)]
        used = int((await redis.info("memory"))["used_memory"]) - empty
    finally:
        await redis.aclose()
    return [o.row() for o in outcomes], used


def main(argv: Sequence[str] | None = None) -> int:
    from worker.embedded import EmbeddedRedis

    args = _args(argv)
    root = Path(tempfile.mkdtemp(prefix="memfleet-bench-"))
    server = EmbeddedRedis(root / "redis")
    try:
        url = server.start()
        rows, used = asyncio.run(_bench(args, url))
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
    limits = Limits()
    print("# Redis bytes one user's hand-overs can hold (no worker runs)")
    print()
    print(f"- limits: {limits}")
    print(f"- message: {len(_longest_message(limits, 'x')):,} emoji a turn"
          f" ({len(_longest_message(limits, 'x').encode()):,} bytes UTF-8)")
    print(f"- used_memory after all three, over the empty server's: {used:,} B")
    print()
    print(table(["scenario", "hand-overs", "taken", "refused", "peak MEMORY USAGE B",
                 "end B", "budget B", "first ms", "last ms", "worst ms", "chat log B"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
