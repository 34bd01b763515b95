"""bench.lib.capacity_model's arithmetic, on round numbers worked out by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from bench.lib.capacity_model import Load, UnitCosts, capacity, users_at_share

COSTS = UnitCosts(
    redis_cpu_ms_per_handover=0.1, redis_cpu_ms_per_job=1.0,
    redis_bytes_per_pending_session=2000.0, pg_cpu_ms_per_job=10.0, pg_commit_ms=20.0,
    pg_wal_bytes_per_job=50_000.0, pg_rows_per_job=18.0, bytes_per_fact=5000.0,
    facts_added_per_job=7.0,
)


def test_peak_rates_follow_users_turns_peak_and_coalescing() -> None:
    # 864,000 users x 20 turns = 17,280,000 hand-overs a day = 200/s; x3 at the peak.
    c = capacity(COSTS, Load(users=864_000, handovers_per_job=2.0))
    assert c.handovers_per_s_peak == pytest.approx(600.0)
    assert c.jobs_per_s_peak == pytest.approx(300.0)
    # Redis: 600 x 0.1 ms + 300 x 1 ms = 360 ms of CPU each second.
    assert c.redis_core_share == pytest.approx(0.36)
    # PostgreSQL: 300 jobs/s x 10 ms = 3 s of CPU each second, on one core.
    assert c.pg_cpu_share == pytest.approx(3.0)
    assert c.first_limit == "PostgreSQL"
    assert c.pg_wal_bytes_per_s == pytest.approx(300 * 50_000)
    assert c.pg_wal_bytes_per_day == pytest.approx(17_280_000 / 2 * 50_000)
    assert c.fact_rows_added_per_day == pytest.approx(17_280_000 / 2 * 7)


def test_storage_and_pending_bytes() -> None:
    c = capacity(COSTS, Load(users=1000, facts_per_user=200, pending_s=30))
    assert c.fact_rows == 200_000
    assert c.fact_bytes == pytest.approx(200_000 * 5000)
    assert c.redis_pending_bytes == pytest.approx(c.handovers_per_s_peak * 30 * 2000)


def test_more_postgres_cores_share_the_cpu() -> None:
    one = capacity(COSTS, Load(users=864_000))
    four = capacity(COSTS, Load(users=864_000, pg_cores=4))
    assert four.pg_cpu_share == pytest.approx(one.pg_cpu_share / 4)


def test_users_at_full_share_is_where_the_share_reaches_one() -> None:
    load = Load(users=1, handovers_per_job=2.0)
    for server, share in (("Redis", "redis_core_share"), ("PostgreSQL", "pg_cpu_share")):
        users = users_at_share(COSTS, load, server)
        at = capacity(COSTS, Load(users=round(users), handovers_per_job=2.0))
        assert getattr(at, share) == pytest.approx(1.0, rel=1e-5)


def test_a_free_server_never_fills() -> None:
    free = replace(COSTS, redis_cpu_ms_per_handover=0.0, redis_cpu_ms_per_job=0.0)
    assert math.isinf(users_at_share(free, Load(users=1), "Redis"))
