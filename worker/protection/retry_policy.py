"""The retry policy: what becomes of a job whose run raised, decided by the error tree.

Only transient errors (``MemfleetError.transient``) are tried again, after a
backoff, with the cursor untouched. On the last try a database outage is waited
out; anything else fails. A model that keeps breaking the answer schema gets
ANSWER_JOB_TRIES tries (worker.errors), then its slice is skipped. Work that is
deterministic on the slice's own text is skipped at once, since another try would
end the same way.
"""

from __future__ import annotations

from enum import Enum

from worker.errors import (
    MemfleetError,
    OfflineAnswerInvalid,
    ProviderAnswerInvalid,
    ProviderWorkOverBudget,
    answer_try_left,
)
from worker.outcomes import Outcome

# Outcomes after which no job comes for the session's lists until the next
# hand-over or a re-drive (memfleet retry): dead letters, not waiting work.
GIVEN_UP = frozenset({Outcome.FAILED, Outcome.INVALID})


class Next(Enum):
    """What becomes of a run that raised a MemfleetError; each value is the job's outcome."""

    RETRY = Outcome.RETRY
    FAIL = Outcome.FAILED
    SKIP = Outcome.SKIPPED
    WAIT_OUT = Outcome.DEFERRED

    @property
    def outcome(self) -> Outcome:
        return self.value


def after_error(exc: MemfleetError, job_try: int, max_tries: int) -> Next:
    """The retry policy, decided by the error tree: only transient errors are tried again."""
    if isinstance(exc, (OfflineAnswerInvalid, ProviderWorkOverBudget)):
        # Deterministic work on this slice's text: another try would end the same way,
        # and failing would block the session's later turns. Skipped, on the record.
        return Next.SKIP
    if not exc.transient:
        return Next.FAIL
    if isinstance(exc, ProviderAnswerInvalid):
        # A model that keeps breaking the contract on this slice: one more try for a
        # fresh sample, then skip it on the record rather than block the session
        # (docs/architecture.md); MEMFLEET_MAX_TRIES is for outages.
        return Next.RETRY if answer_try_left(job_try, max_tries) else Next.SKIP
    if job_try < max_tries:
        return Next.RETRY
    if exc.outage:
        return Next.WAIT_OUT
    return Next.FAIL


def backoff_s(job_try: int) -> float:
    """The wait before ARQ's next try: doubling, at most five minutes."""
    return float(min(300, 2 ** min(job_try, 9)))
