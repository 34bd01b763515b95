"""How a run of the memory job ended: one name per outcome, decided by the pipeline
or the fleet, stored and exported as is.

The values are a contract. They are the ``outcome`` column of ``memory_run``,
the ``outcome`` label of ``memfleet_jobs_total`` (the dashboard and the alerts
select on them), the commit event's ``outcome`` field, the job's result in
ARQ, and what ``memfleet runs --outcome`` filters on: renaming one leaves
stored rows, panels and alerts behind (tests/unit/fleet/test_outcomes.py).

The pipeline ends the runs it gets through (worker.pipeline.persist) and the
fleet ends the jobs it does not (worker.fleet.job), so the enum stands beside
both rather than in either; the retry policy is the fleet's
(worker.fleet.retry_policy).
"""

from __future__ import annotations

from enum import StrEnum

from worker.errors import MemfleetError


class Outcome(StrEnum):
    # The pipeline's (worker.pipeline.persist); each but ``erased`` has its audit row.
    COMMITTED = "committed"  # the slice's facts written, the cursor moved past it
    EMPTY = "empty"          # nothing after the cursor
    FENCED = "fenced"        # another run committed the slice first: nothing written
    SKIPPED = "skipped"      # the cursor moved past the slice with no fact, on the record
    OPTED_OUT = "opted_out"  # the user turned memory off: the cursor moved, nothing read
    ERASED = "erased"        # the user was erased meanwhile: nothing written, no row
    # The fleet's (worker.fleet.job).
    DEFERRED = "deferred"    # the session is busy, resting or away: a later job takes it
    INVALID = "invalid"      # the job or its payload cannot be read; never retried
    RETRY = "retry"          # a transient error: ARQ runs the job again
    FAILED = "failed"        # a permanent error, or a transient one on the last try
    ERROR = "error"          # anything memfleet did not expect
    CANCELLED = "cancelled"  # ARQ's job timeout: counted, no audit row
    ADOPTED = "adopted"      # a job of an older release, its sessions taken over: counted


# Outcomes that stored nothing for the slice they were given: the dead letters
# `memfleet runs` lists by default and the MemfleetDeadLetters alert counts.
DEAD_LETTERS = (Outcome.FAILED, Outcome.SKIPPED, Outcome.INVALID, Outcome.ERROR)


def parse_outcomes(text: str) -> list[Outcome]:
    """Comma-separated outcome names (``memfleet runs --outcome``); an unknown one is
    refused, since it would match no row and look like an empty list."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = {outcome.value for outcome in Outcome}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise MemfleetError(f"unknown outcome {unknown[0]!r} (one of: {', '.join(Outcome)})")
    return [Outcome(name) for name in names]
