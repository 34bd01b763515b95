"""How a run of the memory job ended: one name per outcome, decided by the pipeline
or the fleet, stored and exported as is.

The values are a contract. They are the ``outcome`` column of ``memory_run``,
the ``outcome`` label of ``memfleet_jobs_total`` (the dashboard and the alerts
select on them), the commit event's ``outcome`` field, the job's result in
ARQ, and what ``memfleet runs --outcome`` filters dead letters on: renaming one
leaves stored rows, panels and alerts behind (tests/unit/fleet/test_outcomes.py).

The pipeline ends the runs it gets through (worker.pipeline.persist) and the
fleet ends the jobs it does not (worker.fleet.job), so the enum stands beside
both rather than in either; the retry policy is the fleet's
(worker.protection.retry_policy).
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

# Outcomes of the runs that moved their session's cursor (memfleet_commit_run writes
# the run's row with the move): the first such run after a dead letter resolves it.
CURSOR_MOVES = (Outcome.COMMITTED, Outcome.SKIPPED, Outcome.OPTED_OUT)

# The runs that tried a slice and stored nothing: a dead letter's attempts (ARQ's
# retried tries included).
ATTEMPTS = (*DEAD_LETTERS, Outcome.RETRY)


def parse_dead_letter_outcomes(text: str) -> list[Outcome]:
    """Comma-separated dead-letter outcome names (``memfleet runs --outcome``); any
    other name is refused, since it would match nothing and look like an empty list."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    valid = ", ".join(DEAD_LETTERS)
    if not names:
        raise MemfleetError(f"--outcome names no outcome (one of: {valid})")
    for name in names:
        if name not in {outcome.value for outcome in Outcome}:
            raise MemfleetError(f"unknown outcome {name!r} (one of: {valid})")
        if name not in {outcome.value for outcome in DEAD_LETTERS}:
            raise MemfleetError(f"{name!r} is not a dead-letter outcome (one of: {valid})")
    return [Outcome(name) for name in names]
