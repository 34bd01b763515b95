"""``memfleet webhook``: the commit events (worker.protocol.events) POSTed to a URL, at least once.

One sender per fleet reads the events stream in a consumer group, POSTs each
event as JSON and acknowledges it once the receiver answered 2xx. Delivery is
at least once: a sender killed after a POST and before its acknowledgement
sends that event again when it restarts (it reads its own pending entries
first), and another sender of the group claims the entries of one that stays
dead. Receivers deduplicate by the body's ``id`` (signed; the
``X-Memfleet-Event-Id`` header repeats it, unsigned).

- 2xx: delivered. 408, 429, 5xx, a timeout or no connection: the receiver is
  away; the same event is tried again with backoff, for as long as it takes,
  so events keep their order. Any other answer (a 4xx): the receiver refuses
  the event; it is acknowledged, logged by id and counted, never tried forever.
- Every POST is signed over its time and its body (worker.protocol.webhook_signature:
  ``X-Memfleet-Signature: t=<unix>,v1=<hex>``; receivers check it with
  ``verify``, within a 5-minute tolerance). A secret (MEMFLEET_WEBHOOK_SECRET)
  is required unless unsigned deliveries are chosen (``--unsigned``,
  MEMFLEET_WEBHOOK_UNSIGNED); a URL that cannot be posted to is refused at
  start, never tried forever (worker.fleet.webhook_start: the checks at start, the
  receiver's host name, and where the group starts or replays from).
- Redis away (down, restarting) never ends the sender: it logs one line when it
  loses Redis and one when it has it back (worker.fleet.server_watch), tries
  again every ``REDIS_RETRY_S`` meanwhile, and goes on from its group's place;
  an event posted and not acknowledged when Redis went is posted again.
- Log lines name the receiver by its redacted URL (worker.log_redaction).
- The body holds the event's fields only: a session stand-in, a hand-over
  number, counts and a time; never an id or text.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import socket
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import structlog

from worker.errors import ConfigurationError
from worker.fleet.server_watch import Reachability
from worker.log_redaction import redact_url
from worker.protocol.arq_worker import REDIS_DOWN
from worker.protocol.events import CommitEvent
from worker.protocol.webhook_signature import HEADER, MIN_SECRET_CHARS, sign

log = structlog.get_logger("memfleet.webhook")

REDIS_RETRY_S = 1.0

GROUP = "memfleet-webhook"
BLOCK_MS = 5_000
BATCH = 50
# An entry another sender read and did not acknowledge for this long: that sender died.
CLAIM_IDLE_MS = 60_000
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0
_AWAY = frozenset({408, 429})
# A DNS name's label (RFC 1123; "_" too, as container networks name services with it).
_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    url: str
    secret: str | None = None
    timeout_s: float = 10.0


def webhook_target(url: str, secret: str | None, *, unsigned: bool) -> WebhookTarget:
    """The receiver, checked before anything is sent: an http(s) URL with a host name or
    address and a valid port, and a secret unless unsigned deliveries were chosen.
    ConfigurationError otherwise (its message never quotes the URL or the secret)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        parsed = None
    if (parsed is None or parsed.scheme not in ("http", "https")
            or not host_name_or_address(parsed.raw_host)
            or (parsed.port is not None and not 0 < parsed.port < 65536)):
        raise ConfigurationError("the webhook URL (--url or MEMFLEET_WEBHOOK_URL) must be "
                                 "an http:// or https:// URL with a host (a DNS name or an IP "
                                 "address) and a port from 1 to 65535")
    if unsigned and secret:
        raise ConfigurationError("MEMFLEET_WEBHOOK_SECRET is set and unsigned deliveries "
                                 "were asked for (--unsigned or MEMFLEET_WEBHOOK_UNSIGNED): "
                                 "choose one")
    if not unsigned and not secret:
        raise ConfigurationError("memfleet webhook signs its deliveries: set "
                                 "MEMFLEET_WEBHOOK_SECRET, or choose unsigned deliveries "
                                 "with --unsigned (MEMFLEET_WEBHOOK_UNSIGNED=true)")
    if secret and len(secret) < MIN_SECRET_CHARS:
        raise ConfigurationError(f"MEMFLEET_WEBHOOK_SECRET must be at least "
                                 f"{MIN_SECRET_CHARS} characters")
    return WebhookTarget(url, secret or None)


def host_name_or_address(raw_host: bytes) -> bool:
    """An IP address, or a DNS name (IDNA-encoded by httpx) a resolver could be asked for:
    not ``exa mple.com``, ``ho$t``, ``-bad-`` or ``...``, which httpx lets through."""
    host = raw_host.decode("ascii", "replace")
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    return 0 < len(host) <= 253 and all(_LABEL.fullmatch(label) for label in labels)


def body_of(event: CommitEvent) -> bytes:
    return json.dumps(asdict(event), separators=(",", ":")).encode()


def receiver_away(status: int) -> bool:
    return status in _AWAY or status >= 500


async def post(http: httpx.AsyncClient, target: WebhookTarget, event: CommitEvent) -> bool:
    """POST one event until the receiver takes or refuses it; True when taken."""
    body = body_of(event)
    headers = {"content-type": "application/json", "x-memfleet-event-id": event.id}
    delay = BACKOFF_BASE_S
    while True:
        if target.secret:  # signed at each try: a retry's timestamp is its own
            headers[HEADER] = sign(target.secret, body)
        try:
            response = await http.post(target.url, content=body, headers=headers,
                                       timeout=target.timeout_s)
            if response.is_success:
                return True
            if not receiver_away(response.status_code):
                log.warning("event refused by the receiver", event_id=event.id,
                            status=response.status_code)
                return False
            problem = f"HTTP {response.status_code}"
        except httpx.TransportError as exc:
            problem = type(exc).__name__
        log.warning("receiver away; trying again", event_id=event.id, problem=problem,
                    in_s=delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, BACKOFF_MAX_S)


def _parse(entries: Any) -> list[CommitEvent]:
    return [CommitEvent.parse(entry_id, fields) for entry_id, fields in entries or [] if fields]


async def next_events(redis: Any, events_key: str, consumer: str, *,
                      block_ms: int = BLOCK_MS) -> list[CommitEvent]:
    """This consumer's unacknowledged entries first (a restart after a crash), then
    a dead sender's, then new ones."""
    answer = await redis.xreadgroup(GROUP, consumer, {events_key: "0"}, count=BATCH)
    events = _parse(answer[0][1] if answer else [])
    if events:
        return events
    claimed = await redis.xautoclaim(events_key, GROUP, consumer, CLAIM_IDLE_MS, "0-0",
                                     count=BATCH)
    events = _parse(claimed[1])
    if events:
        return events
    answer = await redis.xreadgroup(GROUP, consumer, {events_key: ">"}, count=BATCH,
                                    block=block_ms)
    return _parse(answer[0][1] if answer else [])


async def deliver_forever(redis: Any, events_key: str, target: WebhookTarget, *,
                          consumer: str | None = None, redis_url: str | None = None) -> None:
    """Deliver events until cancelled, from where the group is
    (worker.fleet.webhook_start.place_group creates or moves it first); Redis away is
    waited out (``redis_url``: only to name its address in the log)."""
    consumer = consumer or socket.gethostname()
    log.info("delivering commit events", receiver=redact_url(target.url),
             signed=target.secret is not None, consumer=consumer)
    redis_state = Reachability("Redis", redis_url)
    async with httpx.AsyncClient() as http:
        while True:
            try:
                events = await next_events(redis, events_key, consumer)
                redis_state.answered()
                for event in events:
                    await post(http, target, event)
                    await redis.xack(events_key, GROUP, event.id)
            except REDIS_DOWN as exc:
                redis_state.failed(exc)
                await asyncio.sleep(REDIS_RETRY_S)
