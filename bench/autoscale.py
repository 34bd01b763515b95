"""Autoscaling on this machine: KEDA's formula starts and stops real workers under a ramp.

A controller loop reads the fleet's state the way the exporter does
(worker.fleet.probe.probe, one Lua round trip), applies the replica arithmetic of
deploy/k8s/keda.yaml's two triggers (bench.lib.keda_formula: jobs = ready + in
progress, AverageValue, threshold MEMFLEET_MAX_JOBS per replica; lag, Value,
threshold the lag target) and starts `memfleet worker` processes or stops
surplus ones with SIGTERM, as the HPA changes a Deployment's replicas: a removed
worker finishes its running jobs first (ARQ's job_completion_wait, the pod's
grace period in the cluster). Meanwhile hand-overs are offered at a rate that
ramps up to a peak and back down (bench.lib.autoscale_load).

The workers run the real path: the `openai` providers against the project's
OpenAI-compatible stub, whose chat answers take ``--llm-latency-ms`` each, so a
worker's capacity is set by the model (MEMFLEET_MAX_JOBS calls at a time), not by
this machine's CPUs. KEDA's and the HPA's durations are divided by
``--time-scale`` so the run takes minutes (the polling interval, the
stabilization windows, the policies' periods, the cooldown).

At the end, with the fleet idle, PostgreSQL must hold every stated fact of
every user exactly once, every session's messages committed exactly once and no
failed run: the exit status is 1 otherwise.

Run: .venv/bin/python -m bench.autoscale [--quick] (`make autoscale`)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from bench.lib.autoscale_load import (
    Offered,
    Ramp,
    hand_over_leftovers,
    new_sessions,
    offer_load,
    session_id,
    user_id,
)
from bench.lib.autoscale_plot import plot_autoscale
from bench.lib.keda_formula import Behavior, History, Trigger, desired_replicas, keda_activation
from bench.lib.servers import throwaway_servers
from bench.lib.stats import pct, table
from worker.fleet.probe import FleetSnapshot, probe
from worker.outcomes import Outcome
from worker.protocol.queue import DEFAULT_QUEUE
from worker.store.migrate import migrate

DIM = 64
DEFAULT_PLOT = Path("docs/autoscale.png")
# Outcomes of a run that gave up or was refused (worker.fleet.job): none may occur.
BAD_OUTCOMES = (Outcome.FAILED, Outcome.ERROR, Outcome.INVALID)
STOP_WAIT_S = 60.0
# The offered rate is counted over this trailing window: at the low rate one poll
# holds one hand-over or none.
RATE_WINDOW_S = 4.0


@dataclass(frozen=True, slots=True)
class Options:
    users: int
    duration_s: float
    low_rate: float
    peak_rate: float
    min_replicas: int
    max_replicas: int
    max_jobs: int
    lag_target_s: float
    llm_latency_ms: int
    time_scale: float
    seed: int
    plot: Path | None
    timeline: Path | None


class WorkerFleet:
    """`memfleet worker` processes: the replicas, and the ones draining after a SIGTERM.

    ``target`` is what the controller set (a Deployment's spec.replicas, what the
    HPA reads as the current count); a worker that exits by itself is replaced,
    as a ReplicaSet would replace its pod."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.target = 0
        self.running: list[subprocess.Popen[bytes]] = []
        self.draining: list[subprocess.Popen[bytes]] = []
        self.started = 0
        self.exited_badly = 0  # a worker that exited by itself, or non-zero after a SIGTERM

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.started += 1
        with (self.log_dir / f"worker-{self.started}.log").open("wb") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "worker.cli", "worker", "--log-level", "WARNING"],
                env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def reap(self) -> None:
        """Forget the workers that exited: a drained one is done, a running one
        crashed and is replaced."""
        for proc in [p for p in self.running if p.poll() is not None]:
            self.running.remove(proc)
            self.exited_badly += 1
        for proc in [p for p in self.draining if p.poll() is not None]:
            self.draining.remove(proc)
            self.exited_badly += int(proc.returncode != 0)
        self.scale_to(self.target)

    def scale_to(self, replicas: int) -> None:
        self.target = replicas
        while len(self.running) < replicas:
            self.running.append(self._spawn())
        while len(self.running) > replicas:
            # The newest goes first, as a ReplicaSet picks the youngest pod to delete.
            proc = self.running.pop()
            proc.send_signal(signal.SIGTERM)
            self.draining.append(proc)

    def stop_all(self) -> None:
        """SIGTERM every worker and wait for its drain; SIGKILL only a worker that
        outlives the wait (this is the clean-up path, never the measured run)."""
        self.scale_to(0)
        deadline = time.monotonic() + STOP_WAIT_S
        for proc in self.draining:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.reap()


@dataclass
class Run:
    """What the controller saw, poll by poll."""

    rows: list[dict[str, float]] = field(default_factory=list)
    load_end_s: float = 0.0
    idle_at_s: float | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)


def worker_env(servers_db: str, servers_redis: str, stub_v1: str, home: Path,
               max_jobs: int) -> dict[str, str]:
    # Nothing of this shell's MEMFLEET_* settings: the workers and the driver agree on
    # the defaults (the queue name among them).
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFLEET_")}
    env.update({
        "MEMFLEET_DATABASE_URL": servers_db, "MEMFLEET_REDIS_URL": servers_redis,
        "MEMFLEET_HOME_DIR": str(home), "MEMFLEET_EMBED_DIM": str(DIM),
        "MEMFLEET_LLM_PROVIDER": "openai", "MEMFLEET_LLM_BASE_URL": stub_v1,
        "MEMFLEET_EMBED_PROVIDER": "openai", "MEMFLEET_EMBED_BASE_URL": stub_v1,
        "MEMFLEET_MAX_JOBS": str(max_jobs),
        # A worker needs no more connections than jobs, and the fleet at its largest
        # stays under the embedded PostgreSQL's max_connections.
        "MEMFLEET_DB_POOL_MAX": str(max_jobs + 1),
        "MEMFLEET_TELEMETRY_ID_KEY": secrets.token_hex(16),
    })
    return env


def triggers(snap: FleetSnapshot, opts: Options) -> tuple[Trigger, Trigger]:
    """keda.yaml's two triggers, on the numbers the exporter serves."""
    return (Trigger("jobs", snap.jobs, opts.max_jobs, average=True),
            Trigger("lag", snap.lag_s, opts.lag_target_s, average=False))


async def control(redis: Redis, fleet: WorkerFleet, offered: Offered, ramp: Ramp,
                  opts: Options, behavior: Behavior, started: float, run: Run) -> None:
    """Every polling interval: probe, compute the count, start or stop workers."""
    history = History()
    last_print = -1e9
    last_active = 0.0
    while not run.stop.is_set():
        now = time.monotonic() - started
        try:
            snap = await probe(redis, DEFAULT_QUEUE)
        except Exception as exc:  # noqa: BLE001 - as the exporter: a failed probe is retried
            print(f"  t={now:5.0f} s  probe failed: {type(exc).__name__}", flush=True)
            await asyncio.sleep(behavior.polling_interval_s)
            continue
        fleet.reap()
        current = fleet.target
        measured = triggers(snap, opts)
        if any(t.value > 0 for t in measured):
            last_active = now
        # With minReplicaCount 0, KEDA itself goes between 0 and 1; the HPA above that.
        activation = (keda_activation(current, measured, now - last_active, behavior=behavior)
                      if opts.min_replicas == 0 else None)
        if activation is not None:
            desired = activation
        else:
            desired, history = desired_replicas(
                now, current, measured, history, behavior=behavior,
                min_replicas=max(1, opts.min_replicas), max_replicas=opts.max_replicas)
        fleet.scale_to(desired)
        run.rows.append({
            "t": round(now, 2), "replicas": current, "desired": desired,
            "draining": len(fleet.draining), "workers": snap.workers, "jobs": snap.jobs,
            "ready": snap.ready, "in_progress": snap.in_progress, "deferred": snap.deferred,
            "lag_s": snap.lag_s, "sessions_waiting": snap.sessions_waiting,
            "offered_per_s": round(offered.rate_between(max(0.0, now - RATE_WINDOW_S), now), 2),
            "target_per_s": round(ramp.rate_at(now), 2),
        })
        if now - last_print >= 15:
            last_print = now
            print(f"  t={now:5.0f} s  offered {ramp.rate_at(now):4.1f}/s  replicas {current}"
                  f" -> {desired}  jobs {snap.jobs:3d}  lag {snap.lag_s:5.1f} s", flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.stop.wait(),
                                   behavior.polling_interval_s - (time.monotonic() - started - now))


async def wait_idle(redis: Redis, fleet: WorkerFleet, run: Run, opts: Options,
                    behavior: Behavior, started: float, timeout_s: float) -> None:
    """Until no session waits and no job is ready or running, then until the
    controller is back at the minimum (or the scale-in would have had time to)."""
    deadline = time.monotonic() + timeout_s
    while True:
        snap = await probe(redis, DEFAULT_QUEUE)
        if snap.jobs == 0 and snap.sessions_waiting == 0:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the fleet did not go idle in {timeout_s:.0f} s")
        await asyncio.sleep(0.5)
    run.idle_at_s = time.monotonic() - started
    settle = time.monotonic() + behavior.down_window_s + 3 * behavior.down_period_s
    while time.monotonic() < settle:
        if fleet.target <= opts.min_replicas:
            return
        await asyncio.sleep(0.5)


@dataclass(frozen=True, slots=True)
class Check:
    expected: int
    stored: int  # active facts of the run's users
    lost: int  # expected, not active
    doubled: int  # active copies beyond the first of one text
    unexpected: int  # active, never stated
    sessions_off: int  # sessions whose committed slices do not cover each message once
    outcomes: dict[str, int]

    @property
    def failed_runs(self) -> int:
        return sum(self.outcomes.get(o, 0) for o in BAD_OUTCOMES)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.doubled or self.unexpected or self.sessions_off
                    or self.failed_runs)


async def check_exactly_once(database_url: str, offered: Offered) -> Check:
    expected = offered.expected()
    db = await asyncpg.connect(database_url)
    try:
        rows = await db.fetch(
            "SELECT user_id, text, count(*) AS n FROM memory_fact"
            " WHERE superseded_at IS NULL AND user_id = any($1::text[]) GROUP BY user_id, text",
            list(expected))
        committed = await db.fetch(
            "SELECT user_id, session_id, sum(slice_len) AS n FROM memory_run"
            " WHERE outcome = 'committed' GROUP BY user_id, session_id")
        outcomes = {r["outcome"]: r["n"] for r in await db.fetch(
            "SELECT outcome, count(*) AS n FROM memory_run GROUP BY outcome")}
    finally:
        await db.close()
    stored = {(r["user_id"], r["text"]): int(r["n"]) for r in rows}
    wanted = {(user, text) for user, texts in expected.items() for text in texts}
    # Every message of a session (user turn and reply) in exactly one committed slice.
    should = {(user_id(s.user), session_id(s.session)): 2 * s.turns
              for s in offered.sessions if s.turns}
    got = {(r["user_id"], r["session_id"]): int(r["n"]) for r in committed}
    return Check(
        expected=len(wanted), stored=sum(stored.values()),
        lost=len(wanted - stored.keys()),
        doubled=sum(n - 1 for n in stored.values() if n > 1),
        unexpected=len(stored.keys() - wanted),
        sessions_off=sum(1 for key, n in should.items() if got.get(key) != n)
        + sum(1 for key in got if key not in should),
        outcomes=outcomes,
    )


def _first(run: Run, column: str) -> str:
    """When a poll first saw ``column`` above 0, in seconds since the load started."""
    return next((f"{r['t']:.1f}" for r in run.rows if r[column] > 0), "never")


def report(run: Run, offered: Offered, check: Check, fleet: WorkerFleet, opts: Options,
           behavior: Behavior, total_s: float) -> str:
    during = [r for r in run.rows if r["t"] <= run.load_end_s]
    lags = [r["lag_s"] for r in during]
    # "desired" is the count each poll set; "replicas" the count it found.
    peak = max(r["desired"] for r in run.rows)
    peak_at = next(r["t"] for r in run.rows if r["desired"] == peak)
    over = sum(1 for lag in lags if lag > opts.lag_target_s)
    idle = "-" if run.idle_at_s is None else f"{run.idle_at_s - run.load_end_s:.0f} s"
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(check.outcomes.items()))
    rows = [
        ["replicas at the start", str(run.rows[0]["replicas"])],
        ["peak replicas", f"{peak} (first at t={peak_at:.0f} s)"],
        ["replicas at the end", str(run.rows[-1]["desired"])],
        *([["from zero: first job seen / first worker's heartbeat",
            f"t={_first(run, 'jobs')} / t={_first(run, 'workers')} s"]]
          if opts.min_replicas == 0 else []),
        ["worker processes started / exited unexpectedly",
         f"{fleet.started} / {fleet.exited_badly}"],
        ["lag during the ramp, p50 / p95 / max",
         f"{pct(lags, 50):.1f} / {pct(lags, 95):.1f} / {max(lags):.1f} s"],
        [f"probes during the ramp with lag over the {opts.lag_target_s:g} s target",
         f"{over} of {len(lags)}"],
        ["hand-overs offered (taken / coalesced into a queued job / refused)",
         f"{len(offered.at)} / {offered.coalesced} / {offered.refused}"],
        ["peak offered rate", f"{max(r['offered_per_s'] for r in during):.1f}/s"],
        ["fleet idle after the load ended", idle],
        ["facts expected / stored (active)", f"{check.expected} / {check.stored}"],
        ["lost", str(check.lost)],
        ["doubled", str(check.doubled)],
        ["stored but never stated", str(check.unexpected)],
        ["sessions not committed exactly once", str(check.sessions_off)],
        [f"failed runs ({'/'.join(BAD_OUTCOMES)})", str(check.failed_runs)],
        ["memory_run outcomes", outcomes],
        ["total time", f"{total_s:.0f} s"],
    ]
    setup = (
        f"{opts.users} users x 2 sessions; offered {opts.low_rate:g} -> {opts.peak_rate:g} ->"
        f" {opts.low_rate:g} hand-overs/s over {opts.duration_s:g} s; model answers in"
        f" {opts.llm_latency_ms} ms per chat call; MEMFLEET_MAX_JOBS={opts.max_jobs};"
        f" replicas {opts.min_replicas}..{opts.max_replicas}; triggers jobs (AverageValue"
        f" {opts.max_jobs}) and lag (Value {opts.lag_target_s:g} s); KEDA/HPA times / "
        f"{opts.time_scale:g}: polling {behavior.polling_interval_s:g} s, scale-down window"
        f" {behavior.down_window_s:g} s, policy periods {behavior.up_period_s:g} s")
    return setup + "\n\n" + table(["autoscaling run", "measured"], rows)


async def main(opts: Options) -> int:
    started_all = time.monotonic()
    behavior = Behavior().scaled(opts.time_scale)
    ramp = Ramp.over(opts.duration_s, opts.low_rate, opts.peak_rate)
    work = Path(tempfile.mkdtemp(prefix="memfleet-autoscale-"))
    keep_logs = True  # until the run has passed its checks
    try:
        with throwaway_servers(durable=True) as servers, StubServer(dim=DIM) as stub:
            await migrate(servers.database_url, embed_dim=DIM)
            # Every chat call waits: the model, not the CPU, bounds a worker's jobs.
            stub.add_fault("latency_ms", latency_ms=opts.llm_latency_ms, count=1_000_000_000,
                           path=CHAT_PATH)
            env = worker_env(servers.database_url, servers.redis_url, stub.v1, work,
                             opts.max_jobs)
            (work / "logs").mkdir()
            fleet = WorkerFleet(env, work / "logs")
            redis = Redis.from_url(servers.redis_url)
            try:
                check, run, offered = await _run(redis, servers.database_url, fleet, ramp,
                                                 behavior, opts)
            finally:
                fleet.stop_all()
                await redis.aclose()
        total_s = time.monotonic() - started_all
        print()
        print(report(run, offered, check, fleet, opts, behavior, total_s))
        if opts.plot is not None or opts.timeline is not None:
            saved = {"rows": run.rows, "lag_target_s": opts.lag_target_s,
                     "jobs_per_replica": opts.max_jobs,
                     "load_end_s": run.load_end_s, "options": _jsonable(opts),
                     "title": _title(opts, run)}
            if opts.timeline is not None:
                opts.timeline.write_text(json.dumps(saved))
            if opts.plot is not None:
                print(f"plot: {opts.plot}" if plot_autoscale(saved, opts.plot)
                      else "plot skipped: matplotlib is not installed here")
        keep_logs = not check.ok
        if keep_logs:
            print("FAILED: not every fact stored exactly once, or a run failed")
            return 1
        return 0
    finally:
        if keep_logs:
            print(f"worker logs kept in {work / 'logs'}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


async def _run(redis: Redis, database_url: str, fleet: WorkerFleet, ramp: Ramp,
               behavior: Behavior, opts: Options) -> tuple[Check, Run, Offered]:
    fleet.scale_to(opts.min_replicas)
    await _wait_for_workers(redis, opts.min_replicas)
    offered = Offered(new_sessions(opts.users, opts.seed))
    run = Run()
    started = time.monotonic()
    controller = asyncio.create_task(
        control(redis, fleet, offered, ramp, opts, behavior, started, run))
    try:
        print(f"load: {ramp.duration_s:.0f} s of hand-overs, then the drain", flush=True)
        await offer_load(redis, ramp, offered, started, DEFAULT_QUEUE)
        await hand_over_leftovers(redis, offered, started, DEFAULT_QUEUE)
        run.load_end_s = time.monotonic() - started
        await wait_idle(redis, fleet, run, opts, behavior, started, timeout_s=600)
    finally:
        run.stop.set()
        await controller
    return await check_exactly_once(database_url, offered), run, offered


async def _wait_for_workers(redis: Redis, count: int, timeout_s: float = 60.0) -> None:
    """The first replicas are up when their heartbeats are in Redis."""
    deadline = time.monotonic() + timeout_s
    while (await probe(redis, DEFAULT_QUEUE)).workers < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the first workers did not start")
        await asyncio.sleep(0.2)


def _jsonable(opts: Options) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()}


def _title(opts: Options, run: Run) -> str:
    peak = max(r["desired"] for r in run.rows)
    return (f"memfleet autoscaling on this machine: KEDA's formula, real worker processes"
            f" ({run.rows[0]['replicas']} -> {peak} -> {run.rows[-1]['desired']})\n"
            f"{opts.users * 2} sessions, {opts.low_rate:g} -> {opts.peak_rate:g} hand-overs/s,"
            f" model {opts.llm_latency_ms} ms per call, MEMFLEET_MAX_JOBS={opts.max_jobs},"
            f" KEDA/HPA times / {opts.time_scale:g}")


def parse(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run of about a minute (fewer users, a shorter ramp,"
                             " KEDA's times / 20); writes no plot unless --plot is given")
    parser.add_argument("--users", type=int, help="users, 2 sessions each (200)")
    parser.add_argument("--duration-s", type=float, help="length of the ramp (240)")
    parser.add_argument("--low-rate", type=float, default=1.0, help="hand-overs/s at both ends")
    parser.add_argument("--peak-rate", type=float, help="hand-overs/s at the peak (12)")
    parser.add_argument("--min-replicas", type=int, default=1,
                        help="0: scale to zero (KEDA activates on the first job, and "
                             "returns to 0 after its cooldown with no active trigger)")
    parser.add_argument("--max-replicas", type=int, default=8)
    parser.add_argument("--max-jobs", type=int, default=4,
                        help="MEMFLEET_MAX_JOBS, also the jobs trigger's threshold")
    parser.add_argument("--lag-target-s", type=float, default=10.0,
                        help="the lag trigger's threshold")
    parser.add_argument("--llm-latency-ms", type=int, default=600,
                        help="the stub's delay on every chat call")
    parser.add_argument("--time-scale", type=float,
                        help="KEDA's and the HPA's durations divided by this (10)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--plot", type=Path,
                        help=f"the plot to write ({DEFAULT_PLOT} for the full run)")
    parser.add_argument("--timeline", type=Path, help="also save the timeline as JSON here")
    args = parser.parse_args(argv)
    if args.min_replicas < 0:
        parser.error("--min-replicas: 0 (scale to zero) or more")
    quick = args.quick
    return Options(
        users=args.users or (60 if quick else 200),
        duration_s=args.duration_s or (60.0 if quick else 240.0),
        low_rate=args.low_rate,
        peak_rate=args.peak_rate or (8.0 if quick else 12.0),
        min_replicas=args.min_replicas, max_replicas=args.max_replicas,
        max_jobs=args.max_jobs, lag_target_s=args.lag_target_s,
        llm_latency_ms=args.llm_latency_ms,
        time_scale=args.time_scale or (20.0 if quick else 10.0),
        seed=args.seed,
        plot=args.plot or (None if quick else DEFAULT_PLOT),
        timeline=args.timeline,
    )


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parse())))
