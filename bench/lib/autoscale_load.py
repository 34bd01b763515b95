"""The autoscaling run's load: hand-overs offered at a rate that ramps up and down.

Many users with two sessions each (numbered alike for every user, "chat0" and
"chat1", as chat products do); every hand-over extends one session by a user
turn that states one new fact under the rules extractor the LLM stub answers
with ("I use kitU.S.T" -> "Uses kitU.S.T"), and hands the whole list over as a
chat server would. Sessions take turns in a shuffled order, so one session's
hand-overs are far apart and a job has real work in nearly every hand-over.
"""

from __future__ import annotations

import asyncio
import random
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from worker.client.handover import schedule_memory_persistence
from worker.errors import HandoverUnavailable

SESSIONS_PER_USER = 2
REPLY = {"role": "assistant", "content": "Noted."}


@dataclass(frozen=True, slots=True)
class Ramp:
    """Offered hand-overs per second: ``low_rate``, up to ``peak_rate``, back down."""

    low_rate: float
    peak_rate: float
    low_s: float  # at the low rate, before the rise
    rise_s: float
    hold_s: float  # at the peak
    fall_s: float
    tail_s: float  # at the low rate again: the fleet scales back in

    @classmethod
    def over(cls, duration_s: float, low_rate: float, peak_rate: float) -> Ramp:
        # The tail is the longest phase: scaling in waits out the stabilization window.
        return cls(low_rate, peak_rate, 0.10 * duration_s, 0.25 * duration_s,
                   0.20 * duration_s, 0.15 * duration_s, 0.30 * duration_s)

    @property
    def duration_s(self) -> float:
        return self.low_s + self.rise_s + self.hold_s + self.fall_s + self.tail_s

    def rate_at(self, t: float) -> float:
        if t < 0 or t >= self.duration_s:
            return 0.0
        span = self.peak_rate - self.low_rate
        t -= self.low_s
        if t < 0:
            return self.low_rate
        if t < self.rise_s:
            return self.low_rate + span * t / self.rise_s
        t -= self.rise_s
        if t < self.hold_s:
            return self.peak_rate
        t -= self.hold_s
        if t < self.fall_s:
            return self.peak_rate - span * t / self.fall_s
        return self.low_rate


def user_id(user: int) -> str:
    return f"autoscale-user-{user:04d}"


def session_id(session: int) -> str:
    return f"chat{session}"


def statement(user: int, session: int, turn: int) -> str:
    return f"I use kit{user}s{session}t{turn}."


def fact(user: int, session: int, turn: int) -> str:
    """What the rules extractor (the stub's answer) makes of ``statement``."""
    return f"Uses kit{user}s{session}t{turn}"


@dataclass(slots=True)
class SessionState:
    user: int
    session: int
    turns: int = 0
    taken: int = 0  # turns covered by the last hand-over Redis took

    def messages(self) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        for turn in range(self.turns):
            out += [{"role": "user", "content": statement(self.user, self.session, turn)}, REPLY]
        return out


@dataclass(slots=True)
class Offered:
    """What the driver handed over, for the timeline and the end check."""

    sessions: list[SessionState]
    at: list[float] = field(default_factory=list)  # seconds from the start, per hand-over taken
    refused: int = 0  # HandoverUnavailable (Redis slow or the session's backlog full)
    coalesced: int = 0  # taken into a job already queued for the session
    handed_again: int = 0  # sessions whose last turn was handed over again after the ramp

    def rate_between(self, start: float, end: float) -> float:
        """Hand-overs taken per second in (start, end]."""
        if end <= start:
            return 0.0
        return (bisect_left(self.at, end) - bisect_left(self.at, start)) / (end - start)

    def expected(self) -> dict[str, set[str]]:
        """Every user's facts, each stated once."""
        facts: dict[str, set[str]] = {}
        for s in self.sessions:
            facts.setdefault(user_id(s.user), set()).update(
                fact(s.user, s.session, turn) for turn in range(s.turns))
        return facts


def new_sessions(users: int, seed: int) -> list[SessionState]:
    sessions = [SessionState(u, s) for u in range(users) for s in range(SESSIONS_PER_USER)]
    random.Random(seed).shuffle(sessions)
    return sessions


async def _hand_over(redis: Any, state: SessionState, offered: Offered, started: float,
                     queue_name: str) -> bool:
    try:
        enqueued = await schedule_memory_persistence(
            redis, session_id(state.session), user_id(state.user), state.messages(),
            queue_name=queue_name, timeout_s=5.0)
    except HandoverUnavailable:
        # The turn stays in the session: its next hand-over carries it, as a chat
        # server's next turn would.
        offered.refused += 1
        return False
    offered.at.append(time.monotonic() - started)
    offered.coalesced += int(enqueued.job_id is None)
    state.taken = state.turns
    return True


async def offer_load(redis: Any, ramp: Ramp, offered: Offered, started: float,
                     queue_name: str, tick_s: float = 0.05) -> None:
    """Hand over at ``ramp.rate_at`` until the ramp ends (time from ``started``,
    a time.monotonic()). One hand-over at a time: each is a few Redis round trips,
    and the credit below catches up after a slow one."""
    credit = 0.0
    last = 0.0
    nxt = 0
    while (now := time.monotonic() - started) < ramp.duration_s:
        credit += ramp.rate_at(now) * (now - last)
        last = now
        while credit >= 1.0:
            credit -= 1.0
            state = offered.sessions[nxt % len(offered.sessions)]
            nxt += 1
            state.turns += 1
            await _hand_over(redis, state, offered, started, queue_name)
        await asyncio.sleep(tick_s)


async def hand_over_leftovers(redis: Any, offered: Offered, started: float,
                              queue_name: str, tries: int = 10) -> None:
    """Hand over again every session whose last turn Redis refused."""
    for _ in range(tries):
        left = [s for s in offered.sessions if s.taken < s.turns]
        if not left:
            return
        for state in left:
            offered.handed_again += int(await _hand_over(redis, state, offered, started,
                                                        queue_name))
        await asyncio.sleep(1.0)
    raise RuntimeError("Redis kept refusing the last hand-overs")
