"""The expiry pass: facts whose ``expires_at`` has come are superseded, never deleted.

Reads and the neighbour query skip such a fact from its expiry on; this pass
makes it history too: ``superseded_at = expires_at``, ``superseded_reason =
expired``, its validity closed there. Each batch is one transaction that also
bumps the version of every user it changed, so a consolidation that read the
fact re-reads (worker.store.maintenance, worker/store/sql/expiry.sql).

`memfleet expire` runs it once; every worker runs it every
MEMFLEET_EXPIRY_INTERVAL_S (``keep_expiring``). Passes running together share
the work: each takes the users and rows no other holds, and never waits.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import structlog

from worker.store.base import MaintenanceStore

log = structlog.get_logger("memfleet.expiry")

# Per transaction: users whose version row is taken, and facts superseded. Small
# enough that a batch holds those rows only briefly.
BATCH_USERS = 100
BATCH_FACTS = 500


async def expire_due(
    store: MaintenanceStore, *, users: int = BATCH_USERS, facts: int = BATCH_FACTS
) -> int:
    """Batches until one finds nothing it can take; the facts superseded in all.

    Rows another pass or a commit holds are left to them or to the next pass, so
    this ends even while others work.
    """
    total = 0
    while True:
        expired = await store.expire_batch(users=users, facts=facts)
        total += expired
        if expired == 0:
            return total


async def keep_expiring(
    store: MaintenanceStore, every_s: float, on_expired: Callable[[int], None] | None = None,
) -> None:
    """The pass every ``every_s`` seconds, until cancelled.

    Nothing waits for it (reads skip an expired fact already), so a worker that
    starts waits before its first pass, a random half to whole interval: a fleet
    started at once spreads out, and a short-lived worker (a burst) leaves it to
    the others.
    """
    await asyncio.sleep(every_s * random.uniform(0.5, 1.0))  # spreading, not secrecy
    while True:
        try:
            expired = await expire_due(store)
            if expired:
                log.info("facts expired", count=expired)
                if on_expired is not None:
                    on_expired(expired)
        except Exception as exc:  # noqa: BLE001 - a failed pass (PostgreSQL away) is tried again
            log.warning("expiry pass failed", error=type(exc).__name__)
        await asyncio.sleep(every_s)
