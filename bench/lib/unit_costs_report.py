"""bench.unit_costs' figures as markdown: the unit-cost table, then the capacity model's."""

from __future__ import annotations

from typing import Any

from bench.lib.capacity_model import Load, UnitCosts, capacity, users_at_share
from bench.lib.stats import table

CMD = "python -m bench.unit_costs"
# An assumption, not a measurement: the cores of the one PostgreSQL server the model
# gives the jobs (Redis runs its commands on one thread whatever the machine).
PG_CORES = 32


def _top(by_command: dict[str, float], n: int = 6) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in list(by_command.items())[:n])


def _costs_rows(raw: dict[str, Any]) -> list[list[str]]:
    first, follow, job, fact = raw["first"], raw["follow_up"], raw["job"], raw["fact"]
    rows: list[list[str]] = []
    for name, h in (("first hand-over (queues a job)", first),
                    ("follow-up hand-over (joins the queued job)", follow)):
        rows += [
            [f"{name}: Redis commands (EVALSHA + commands run inside it + direct)",
             f"{h['commands']:.2f} ({h['scripts']:.2f} scripts)", CMD],
            [f"{name}: commands by name", _top(h["by_command"]), CMD],
            [f"{name}: Redis server usec (commandstats)", f"{h['usec']:.0f} us", CMD],
            [f"{name}: Redis process CPU (used_cpu_user+sys)", f"{h['cpu_ms']:.3f} ms", CMD],
            [f"{name}: used_memory delta", f"{h['used_memory']:,.0f} B", CMD],
            [f"{name}: MEMORY USAGE of the session's, user's and job's keys",
             f"{h['memory_usage_keys']:,.0f} B", CMD],
            [f"{name}: messages handed over (UTF-8 JSON)",
             f"{h['messages_json_bytes']:,.0f} B", CMD],
            [f"{name}: jobs queued / hand-overs", f"{h['jobs_queued']} / {h['n']}", CMD],
        ]
    rows += [
        ["job: Redis commands (worker polls included)",
         f"{job['redis_commands']:.1f} ({job['redis_scripts']:.2f} scripts)", CMD],
        ["job: commands by name", _top(job["redis_by_command"]), CMD],
        ["job: Redis server usec (commandstats)", f"{job['redis_usec']:.0f} us", CMD],
        ["job: Redis process CPU", f"{job['redis_cpu_ms']:.3f} ms", CMD],
        ["job: PostgreSQL rows written (ins+upd+del)", f"{job['pg_rows']:.1f}", CMD],
        ["job: rows by table (ins/upd/del)",
         "; ".join(f"{t} {'/'.join(f'{v:.1f}' for v in vals)}"
                   for t, vals in job["pg_rows_by_table"].items()), CMD],
        ["job: WAL bytes (pg_wal_lsn_diff, the drain right after a CHECKPOINT)",
         f"{job['wal_bytes']:,.0f} B", CMD],
        ["job: WAL records / full-page images (pg_stat_wal)",
         f"{job['wal_records']:.1f} / {job['wal_fpi']:.1f}", CMD],
        ["job: PostgreSQL CPU, every backend (postmaster + children, /proc)",
         f"{job['pg_cpu_ms']:.2f} ms", CMD],
        ["session after its job: MEMORY USAGE of its and its user's keys",
         f"{raw['held_after_job']:,.0f} B", CMD],
        ["session after its job: used_memory over the state before its hand-overs",
         f"{raw['used_memory_after_jobs']:,.0f} B", CMD],
        ["job: persist stage (the commit transaction) p50 / p95",
         f"{job['persist_ms_p50']:.1f} / {job['persist_ms_p95']:.1f} ms"
         f" (n {job['persist_n']})", CMD],
        ["job: outcomes (added/updated/deleted/unchanged)",
         "/".join(f"{v:.1f}" for v in job["outcomes"].values()), CMD],
        [f"fact: rows (active) in memory_fact, halfvec({fact['dim']})",
         f"{fact['rows']:,} ({fact['active']:,})", CMD],
        ["fact: heap bytes per row (pg_relation_size / rows)",
         f"{fact['heap'] / fact['rows']:,.0f} B", CMD],
        ["fact: TOAST bytes per row", f"{fact['toast'] / fact['rows']:,.0f} B", CMD],
        ["fact: the vector's bytes (avg pg_column_size(embedding))",
         f"{fact['vector_bytes']:,.0f} B", CMD],
        ["fact: whole row (avg pg_column_size(row))", f"{fact['row_bytes']:,.0f} B", CMD],
        ["fact: indexes per row (all)", f"{fact['indexes'] / fact['rows']:,.0f} B", CMD],
        *([f"fact: index {name} per row", f"{size / fact['rows']:,.0f} B", CMD]
          for name, size in fact["by_index"].items()),
        ["fact: total per row (heap + TOAST + indexes)",
         f"{(fact['heap'] + fact['toast'] + fact['indexes']) / fact['rows']:,.0f} B", CMD],
    ]
    for p in raw["paced"]:
        rows.append([
            f"coalescing: {p['name']} ({p['sessions']} sessions x {p['turns']} turns, pause"
            f" {p['pause_s'][0]:g}-{p['pause_s'][1]:g} s, max_jobs {p['max_jobs']},"
            f" model {p['latency_ms']} ms)",
            f"{p['handovers']} hand-overs / {p['jobs_queued']} jobs = {p['ratio']:.2f}"
            f" ({p['runs']} runs)", CMD])
        rows.append([
            f"paced ({p['name']}): per hand-over, Redis CPU / commands (jobs and polls"
            " included); per run, PostgreSQL CPU / WAL / rows / memory_fact rows inserted",
            f"{p['redis_cpu_ms_per_handover']:.3f} ms / {p['redis_commands_per_handover']:.1f};"
            f" {p['pg_cpu_ms_per_run']:.2f} ms / {p['wal_bytes_per_run']:,.0f} B /"
            f" {p['pg_rows_per_run']:.1f} / {p['fact_rows_per_run']:.1f}", CMD])
    for m in raw["max_jobs"]:
        rows.append([f"one replica, model {m['latency_ms']} ms, max_jobs {m['max_jobs']}:"
                     " jobs/s all slots busy (whole drain)",
                     f"{m['jobs_per_s_steady']} ({m['jobs_per_s_whole']})", m["command"]])
    return rows


def paced_costs(raw: dict[str, Any]) -> tuple[UnitCosts, float] | None:
    """Unit costs from the first paced run with a worker keeping up (one job per chat
    turn, as chats produce them), and its coalescing ratio."""
    kept_up = [p for p in raw["paced"] if p["max_jobs"] > 1]
    if not kept_up:
        return None
    p = kept_up[0]
    drained = UnitCosts(**raw["unit_costs"])
    return UnitCosts(
        redis_cpu_ms_per_handover=p["redis_cpu_ms_per_handover"], redis_cpu_ms_per_job=0.0,
        redis_bytes_per_pending_session=drained.redis_bytes_per_pending_session,
        pg_cpu_ms_per_job=p["pg_cpu_ms_per_run"], pg_commit_ms=drained.pg_commit_ms,
        pg_wal_bytes_per_job=p["wal_bytes_per_run"], pg_rows_per_job=p["pg_rows_per_run"],
        bytes_per_fact=drained.bytes_per_fact, facts_added_per_job=p["fact_rows_per_run"],
    ), min(q["ratio"] for q in kept_up)


def _model_rows(raw: dict[str, Any]) -> tuple[list[list[str]], list[str]]:
    ratios = [p["ratio"] for p in raw["paced"] if p["max_jobs"] > 1]
    ratio = min(ratios) if ratios else 1.0  # the least coalescing seen with a worker keeping up
    variants = [("10-candidate jobs", UnitCosts(**raw["unit_costs"]), ratio)]
    if (paced := paced_costs(raw)) is not None:
        variants.append(("paced chat jobs", *paced))
    rows = []
    for (name, costs, handovers_per_job), users in (
            (v, u) for v in variants for u in (1_000_000, 10_000_000, 100_000_000)):
        c = capacity(costs, Load(users=users, handovers_per_job=handovers_per_job,
                                 pg_cores=PG_CORES))
        rows.append([name, f"{users:,}", f"{c.handovers_per_s_peak:,.0f}",
                     f"{c.jobs_per_s_peak:,.0f}",
                     f"{c.redis_core_share:.2f}", f"{c.redis_pending_bytes / 2**20:,.0f} MiB",
                     f"{c.pg_cpu_share:.2f}", f"{c.pg_wal_bytes_per_s / 2**20:,.1f} MiB/s",
                     f"{c.pg_wal_bytes_per_day / 2**40:,.2f} TiB",
                     f"{c.fact_rows / 1e9:,.2f} G", f"{c.fact_bytes / 2**40:,.2f} TiB",
                     f"{c.fact_rows_added_per_day / 1e6:,.0f} M",
                     c.first_limit])
    notes = [f"coalescing ratio used: {ratio:.2f} hand-overs per job (the lowest measured with"
             " a worker keeping up); 20 turns/user/day, peak 3x the day's average, 200 facts"
             " per user (bench.lib.workload's seeded users), pending lists held 30 s"]
    for name, costs, handovers_per_job in variants:
        base = Load(users=1, handovers_per_job=handovers_per_job, pg_cores=PG_CORES)
        notes.append(f"with the {name}' costs: users at which Redis's one core is full at the"
                     f" peak {users_at_share(costs, base, 'Redis'):,.0f}; at which a"
                     f" {PG_CORES}-core PostgreSQL is full (CPU per job)"
                     f" {users_at_share(costs, base, 'PostgreSQL'):,.0f}")
    return rows, notes


def render(raw: dict[str, Any]) -> str:
    load = raw["load"]
    rows, notes = _model_rows(raw)
    return "\n".join([
        f"# Unit costs ({load['cpus']} CPUs; load average 1/5/15 min at start"
        f" {'/'.join(f'{v:.2f}' for v in load['start'])}, at end"
        f" {'/'.join(f'{v:.2f}' for v in load['end'])}; {raw['seconds']:.0f} s)",
        "",
        table(["figure", "measured", "command"], _costs_rows(raw)),
        "",
        "# Capacity model (bench.lib.capacity_model over the figures above)",
        "",
        table(["costs per job from", "users", "hand-overs/s peak", "jobs/s peak",
               "Redis core share", "Redis pending", f"PG CPU share ({PG_CORES} cores)",
               "WAL at peak", "WAL per day",
               "fact rows", "fact bytes", "fact rows added/day", "nearer its limit"], rows),
        "",
        *(f"- {n}" for n in notes),
    ])
