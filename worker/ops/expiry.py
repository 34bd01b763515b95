"""The expiry pass: facts whose ``expires_at`` has come are superseded, never deleted.

Reads and the neighbour query skip such a fact from its expiry on; this pass
makes it history too: ``superseded_at = expires_at``, ``superseded_reason =
expired``, its validity closed there. Each batch is one transaction that also
bumps the version of every user it changed, so a consolidation that read the
fact re-reads (worker.store.maintenance, worker/store/sql/expiry.sql).

`memfleet expire` runs it once; every worker runs it every
MEMFLEET_EXPIRY_INTERVAL_S (worker.fleet.app). Passes running together share
the work: each takes the users and rows no other holds, and never waits.
"""

from __future__ import annotations

from worker.store.base import MaintenanceStore

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
