"""What one Redis and one PostgreSQL carry, from the measured unit costs (docs/capacity.md).

Pure arithmetic over the JSON bench.unit_costs writes; no I/O. Assumptions, each a
parameter: every user chats ``turns_per_day`` turns a day and each turn is handed over;
the peak second carries ``peak_ratio`` times the day's average; a job is
``handovers_per_job`` hand-overs (the measured coalescing ratio); Redis runs on one
core (its commands run on one thread), PostgreSQL spends its measured CPU per job on
``pg_cores`` cores.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True, slots=True)
class UnitCosts:
    """Per-operation figures, all measured by bench.unit_costs."""

    redis_cpu_ms_per_handover: float  # first and follow-up hand-overs' mean
    redis_cpu_ms_per_job: float
    redis_bytes_per_pending_session: float
    pg_cpu_ms_per_job: float  # every PostgreSQL process's CPU over a drain / its jobs
    pg_commit_ms: float  # the persist stage's p50 (wall time of one connection in it)
    pg_wal_bytes_per_job: float
    pg_rows_per_job: float
    bytes_per_fact: float  # memory_fact heap + TOAST + indexes over its rows
    facts_added_per_job: float  # rows memory_fact grows by per job (ADDs + UPDATEs' new rows)


@dataclass(frozen=True, slots=True)
class Load:
    users: int
    turns_per_day: float = 20.0
    peak_ratio: float = 3.0
    handovers_per_job: float = 1.0
    pending_share: float = 1.0  # share of the peak second's sessions with a list pending
    pending_s: float = 30.0  # how long a pending session's list waits, on average
    facts_per_user: float = 200.0
    pg_cores: int = 1


@dataclass(frozen=True, slots=True)
class Capacity:
    users: int
    handovers_per_s_peak: float
    jobs_per_s_peak: float
    redis_core_share: float  # of one core at the peak
    redis_pending_bytes: float
    pg_cpu_share: float  # of pg_cores at the peak (CPU per job x jobs/s)
    pg_wal_bytes_per_s: float
    pg_wal_bytes_per_day: float
    fact_rows: float
    fact_bytes: float
    fact_rows_added_per_day: float

    @property
    def first_limit(self) -> str:
        """The server nearer its one-machine limit at the peak (CPU shares compared)."""
        return "Redis" if self.redis_core_share >= self.pg_cpu_share else "PostgreSQL"


def capacity(costs: UnitCosts, load: Load) -> Capacity:
    handovers_day = load.users * load.turns_per_day
    handovers_peak = handovers_day / SECONDS_PER_DAY * load.peak_ratio
    jobs_peak = handovers_peak / load.handovers_per_job
    jobs_day = handovers_day / load.handovers_per_job
    redis_ms = (handovers_peak * costs.redis_cpu_ms_per_handover
                + jobs_peak * costs.redis_cpu_ms_per_job)
    # Sessions with a list pending at the peak: the hand-overs of ``pending_s`` seconds.
    pending_sessions = handovers_peak * load.pending_s * load.pending_share
    return Capacity(
        users=load.users,
        handovers_per_s_peak=handovers_peak,
        jobs_per_s_peak=jobs_peak,
        redis_core_share=redis_ms / 1000,
        redis_pending_bytes=pending_sessions * costs.redis_bytes_per_pending_session,
        pg_cpu_share=jobs_peak * costs.pg_cpu_ms_per_job / 1000 / load.pg_cores,
        pg_wal_bytes_per_s=jobs_peak * costs.pg_wal_bytes_per_job,
        pg_wal_bytes_per_day=jobs_day * costs.pg_wal_bytes_per_job,
        fact_rows=load.users * load.facts_per_user,
        fact_bytes=load.users * load.facts_per_user * costs.bytes_per_fact,
        fact_rows_added_per_day=jobs_day * costs.facts_added_per_job,
    )


def users_at_share(costs: UnitCosts, load: Load, server: str, share: float = 1.0) -> float:
    """Users at which ``server``'s CPU share at the peak reaches ``share`` (linear)."""
    one = capacity(costs, replace(load, users=1))
    per_user = one.redis_core_share if server == "Redis" else one.pg_cpu_share
    return share / per_user if per_user > 0 else float("inf")
