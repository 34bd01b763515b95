"""The commit events: one entry per settling commit on a Redis stream, without personal data.

Every job whose commit finished some of a session's hand-overs publishes, in
the same round trip that releases the session lock and marks the hand-over
finished (worker/protocol/lua/release.lua), an entry on the queue's events
stream (``memfleet:events:<queue>``, worker.protocol.keys.events_key):

- ``session``: the session's keyed stand-in (worker.telemetry_ids), never its
  ids: a chat server that shares MEMFLEET_TELEMETRY_ID_KEY computes it with
  ``session_tag`` to pick its own sessions out;
- ``handover``: the number of the latest hand-over the commit finished (the
  ``handover_id`` that ``schedule_memory_persistence`` returned), and
  ``older_lists``, the session's older lists still waiting;
- ``outcome`` (committed, empty, skipped, opted_out, ...) and the counts
  ``added``, ``updated``, ``deleted``; ``at``, the Redis clock in ms.

The stream is capped at about ``EVENTS_MAXLEN`` entries. An event follows its
commit: a worker killed between the commit and the release publishes nothing,
and the next job of the session, finding the slice done, publishes the
settling. Consumers read with ``XREAD`` from an id (``read_events``), or in a
consumer group (the webhook sender, worker.fleet.webhook).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from worker.protocol.keys import SessionRef
from worker.protocol.replies import as_text
from worker.telemetry_ids import hashed_id, id_key

EVENTS_MAXLEN = 100_000


@dataclass(frozen=True, slots=True)
class CommitNote:
    """What a settling job publishes beside the session's stand-in (release.lua)."""

    session_tag: str
    outcome: str
    added: int = 0
    updated: int = 0
    deleted: int = 0

    def args(self) -> list[Any]:
        return [self.session_tag, self.outcome, self.added, self.updated, self.deleted,
                EVENTS_MAXLEN]


@dataclass(frozen=True, slots=True)
class CommitEvent:
    id: str  # the stream entry's id
    session: str
    handover: int
    older_lists: int
    outcome: str
    added: int
    updated: int
    deleted: int
    at_ms: int

    def covers(self, handover_id: int) -> bool:
        """Every message of hand-over ``handover_id`` of this session is committed."""
        return self.handover >= handover_id and self.older_lists == 0

    @classmethod
    def parse(cls, entry_id: Any, fields: dict[Any, Any]) -> CommitEvent:
        f = {as_text(k): as_text(v) for k, v in fields.items()}
        return cls(as_text(entry_id), f["session"], int(f["handover"]), int(f["older_lists"]),
                   f["outcome"], int(f["added"]), int(f["updated"]), int(f["deleted"]),
                   int(f["at"]))


def session_tag(session: SessionRef, key: str | None) -> str:
    """The stand-in the events name ``session`` by; ``key`` is MEMFLEET_TELEMETRY_ID_KEY."""
    return hashed_id(session.key, id_key(key))


async def read_events(
    redis: Any, events_key: str, *, after: str = "$", count: int = 100, block_ms: int | None = None
) -> list[CommitEvent]:
    """Events after stream id ``after`` ("0": from the oldest kept; "$": only new ones,
    which needs ``block_ms``), oldest first."""
    answer = await redis.xread({events_key: after}, count=count, block=block_ms)
    events: list[CommitEvent] = []
    for _stream, entries in answer or []:
        events.extend(CommitEvent.parse(entry_id, fields) for entry_id, fields in entries)
    return events


async def last_event_id(redis: Any, events_key: str) -> str:
    """The id of the newest event kept ("0-0": none yet): reading on from it with
    ``read_events`` gets every later event, without the gap two reads from "$" leave."""
    newest = await redis.xrevrange(events_key, count=1)
    return as_text(newest[0][0]) if newest else "0-0"
