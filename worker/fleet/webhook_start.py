"""What ``memfleet webhook`` checks and decides before its first POST: whether the
receiver's host name resolves, where the consumer group reads from, and the line that
tells the operator (stderr) whether deliveries are signed.

The host name is asked for once, at start. The resolver's "no such name" is, at
start, nearly always a mistyped URL: the sender exits 2 at once rather than retry
it forever as if the receiver were down (a supervisor that restarts it shows the
same line until the name exists, which also covers a receiver deployed after its
sender). A resolver that does not answer (a timeout, a temporary failure) says
nothing about the URL: the sender warns and starts, and its POSTs are retried with
backoff like those to a receiver that is away. Once started, a name that stops
resolving is an outage of the receiver, never a reason to exit. Behind a proxy the
proxy resolves the name, so nothing is asked here.

Where the group reads from (``place_group``): a new group starts from now; an
existing group goes on after the last event it read (its pending entries are sent
again first: at least once). ``--from-start`` and ``--from-event ID`` move the
group back (``XGROUP SETID``), new or not: every event kept, or every event from
``ID`` on, is sent again, in order, to a receiver that deduplicates by ``id``.
Pending entries stay pending and are sent once more. A replay never skips an
event: an ``ID`` past the last event the group read is refused.
"""

from __future__ import annotations

import re
import socket
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any

import httpx
from redis.exceptions import ResponseError

from worker.errors import ConfigurationError
from worker.fleet.webhook import GROUP, WebhookTarget
from worker.log_redaction import redact_url
from worker.protocol.replies import as_text

RESOLVE_TIMEOUT_S = 5.0
# The resolver answered: no such name, or no address for it.
_NO_SUCH_NAME = frozenset(code for code in (getattr(socket, "EAI_NONAME", None),
                                            getattr(socket, "EAI_NODATA", None)) if code)
_STREAM_ID = re.compile(r"(\d{1,20})(?:-(\d{1,20}))?")
_MAX_PART = 2**64 - 1
StreamId = tuple[int, int]


def receiver_host_warning(url: str, *, timeout_s: float = RESOLVE_TIMEOUT_S) -> str | None:
    """None when the receiver's host resolves (or is an address, or is behind a proxy);
    a warning when the resolver did not answer; ConfigurationError when it answered that
    the name does not exist."""
    parsed = httpx.URL(url)
    host = parsed.raw_host.decode("ascii")
    proxies = urllib.request.getproxies_environment()
    if ((proxies.get(parsed.scheme) or proxies.get("all"))
            and not urllib.request.proxy_bypass(host)):
        return None
    answer: list[BaseException | None] = []

    def ask() -> None:
        try:
            socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            answer.append(None)
        except (OSError, UnicodeError) as exc:
            answer.append(exc)

    # getaddrinfo cannot be cancelled: a thread that may outlive the wait, not the process.
    asking = threading.Thread(target=ask, name="webhook-resolve", daemon=True)
    asking.start()
    asking.join(timeout_s)
    if not answer:
        return (f"memfleet webhook: the receiver's host {host} did not resolve within "
                f"{timeout_s:g} s: starting anyway; POSTs are retried until it resolves")
    problem = answer[0]
    if problem is None:
        return None
    if isinstance(problem, socket.gaierror) and problem.errno in _NO_SUCH_NAME:
        raise ConfigurationError(f"the webhook receiver's host {host} does not resolve (no "
                                 "such name): check --url or MEMFLEET_WEBHOOK_URL")
    reason = problem.strerror if isinstance(problem, OSError) else type(problem).__name__
    return (f"memfleet webhook: the receiver's host {host} did not resolve now ({reason}): "
            "starting anyway; POSTs are retried until it resolves")


@dataclass(frozen=True, slots=True)
class Replay:
    """Where ``--from-start`` (``first`` (0, 0)) or ``--from-event`` puts the group: its
    events from ``first`` on are sent again."""

    first: StreamId
    asked: str  # as the operator wrote it, for messages

    def set_id(self) -> str:
        """The id XGROUP takes: the group reads the entries after it, so the one before."""
        ms, seq = self.first
        if seq:
            return f"{ms}-{seq - 1}"
        return f"{ms - 1}-{_MAX_PART}" if ms else "0-0"


def replay_of(from_start: bool, from_event: str | None) -> Replay | None:
    if from_start and from_event is not None:
        raise ConfigurationError("--from-start and --from-event both say where to start: "
                                 "choose one")
    if from_start:
        return Replay((0, 0), "start")
    if from_event is None:
        return None
    first = stream_id(from_event)
    if first is None:
        raise ConfigurationError("--from-event needs an event id as the receiver got it "
                                 "(the body's \"id\"), such as 1764158400000-0")
    return Replay(first, from_event)


def stream_id(text: str | bytes) -> StreamId | None:
    match = _STREAM_ID.fullmatch(as_text(text))
    if match is None:
        return None
    ms, seq = int(match[1]), int(match[2] or 0)
    return (ms, seq) if ms <= _MAX_PART and seq <= _MAX_PART else None


def _text_id(value: StreamId) -> str:
    return f"{value[0]}-{value[1]}"


async def _edge_id(redis: Any, events_key: str, *, newest: bool) -> StreamId | None:
    entries = await (redis.xrevrange(events_key, count=1) if newest
                     else redis.xrange(events_key, count=1))
    return stream_id(entries[0][0]) if entries else None


async def _last_read(redis: Any, events_key: str) -> StreamId:
    for group in await redis.xinfo_groups(events_key):
        if as_text(group["name"]) == GROUP:
            return stream_id(group["last-delivered-id"]) or (0, 0)
    raise ConfigurationError(f"the consumer group {GROUP} disappeared while starting: "
                             "start memfleet webhook again")


async def place_group(redis: Any, events_key: str, replay: Replay | None) -> str:
    """Create the group, or move it back for a replay; where it reads from, in words."""
    if replay is not None and replay.first != (0, 0):
        newest = await _edge_id(redis, events_key, newest=True)
        if newest is None or replay.first > newest:
            kept = f"the newest kept is {_text_id(newest)}" if newest else "none is kept"
            raise ConfigurationError(f"--from-event {replay.asked}: no such event yet ({kept})")
    try:
        await redis.xgroup_create(events_key, GROUP, mkstream=True,
                                  id="$" if replay is None else replay.set_id())
        created = True
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
        created = False
    if replay is None:
        if created:
            return "a new group: from the next event on (events kept from before: --from-start)"
        last_read = await _last_read(redis, events_key)
        return f"from where group {GROUP} left off (after {_text_id(last_read)})"
    if not created:
        last_read = await _last_read(redis, events_key)
        if replay.first > last_read:
            skipped = await redis.xrange(events_key, min=f"({_text_id(last_read)}",
                                         max=f"({_text_id(replay.first)}", count=1)
            if skipped:
                raise ConfigurationError(
                    f"--from-event {replay.asked} would skip events group {GROUP} has not "
                    f"read yet (it read up to {_text_id(last_read)}): a replay only sends "
                    "events again")
        await redis.xgroup_setid(events_key, GROUP, replay.set_id())
    if replay.first == (0, 0):
        return f"replaying every event kept ({await redis.xlen(events_key)}), from the oldest"
    oldest = await _edge_id(redis, events_key, newest=False)
    trimmed = (f"; events before {_text_id(oldest)} are no longer kept"
               if oldest and replay.first < oldest else "")
    return f"replaying from event {_text_id(replay.first)}{trimmed}"


def start_line(target: WebhookTarget, where: str) -> str:
    """The one line on stderr that says where deliveries go, whether they are signed and
    where they start (the URL redacted, never the secret)."""
    signing = ("signed (X-Memfleet-Signature, key MEMFLEET_WEBHOOK_SECRET)" if target.secret
               else "UNSIGNED, as chosen (--unsigned or MEMFLEET_WEBHOOK_UNSIGNED): receivers "
                    "cannot tell them from forgeries")
    return (f"memfleet webhook: POSTing commit events to {redact_url(target.url)}, "
            f"{signing}; {where}")
