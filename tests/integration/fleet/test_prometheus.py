"""The Prometheus side with the real binaries (Debian package `prometheus`).

promtool validates the config and the rules and runs the alert unit tests
(each alert fires on its failure, none on a healthy fleet). Then a real
Prometheus scrapes a real `memfleet worker` over loopback, evaluates the
alert rules against it, and answers the dashboard's queries with data.
Skipped, saying why, when the binaries are not installed (`make test`
installs them when it runs as root).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml  # type: ignore[import-untyped]
from redis.asyncio import Redis

from tests.helpers import WorkerProcesses, start_exporter, stop_process, user_msg, worker_env
from tests.unit.deploy.test_dashboard import (
    ALERTS,
    OBSERVABILITY,
    STAGES,
    dashboard_exprs,
    with_rate_interval,
)
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.embedded import free_port

PROMETHEUS_DIR = OBSERVABILITY / "prometheus"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus; make test does)")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="prometheus not installed (apt-get install prometheus; make test does)")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=PROMETHEUS_DIR, capture_output=True,
                          text=True, timeout=60, check=False)


@needs_promtool
def test_promtool_accepts_the_config() -> None:
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_accepts_the_rules() -> None:
    result = promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 10 rules found" in result.stdout


@needs_promtool
def test_the_alert_unit_tests_pass() -> None:
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_the_alert_unit_tests_would_catch_a_broken_rule(tmp_path: Path) -> None:
    """Not vacuous: with one threshold changed, promtool reports the alert that no longer fires."""
    broken = ALERTS.read_text().replace(") > 0.1\n", ") > 0.9\n")
    assert broken != ALERTS.read_text()
    (tmp_path / "alerts.yml").write_text(broken)
    shutil.copy(PROMETHEUS_DIR / "alerts_test.yml", tmp_path)
    assert PROMTOOL is not None
    result = subprocess.run([PROMTOOL, "test", "rules", "alerts_test.yml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "MemfleetFailureRateHigh" in result.stdout + result.stderr


# ---- a real Prometheus scraping a real worker --------------------------------------------

@pytest.fixture
def prometheus_factory(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(worker_port: int, exporter_port: int) -> str:
        assert PROMETHEUS is not None
        port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERTS)],
            "scrape_configs": [{
                "job_name": "memfleet-worker",
                "static_configs": [{"targets": [f"127.0.0.1:{worker_port}"]}],
            }, {
                "job_name": "memfleet-exporter",
                "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
            }],
        }
        path = tmp_path / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        log = (tmp_path / "prometheus.log").open("wb")
        # Its own port and storage: never the packaged service's.
        procs.append(subprocess.Popen(
            [PROMETHEUS, f"--config.file={path}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT,
        ))
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        stop_process(proc)


async def poll(http: httpx.AsyncClient, expr: str, until: Any, timeout_s: float) -> list[Any]:
    """Query until ``until(result)`` holds; the last result otherwise, for the message."""
    deadline = time.monotonic() + timeout_s
    result: list[Any] = []
    while time.monotonic() < deadline:
        try:
            result = await instant(http, expr)
        except httpx.TransportError:
            result = []
        if until(result):
            return result
        await asyncio.sleep(0.25)
    raise AssertionError(f"{expr}: {result}")


async def wait_ready(http: httpx.AsyncClient, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if (await http.get("/-/ready")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.2)
    raise AssertionError("prometheus did not become ready:\n" + read_log(log))


def read_log(path: Path) -> str:
    return path.read_text(errors="replace")[-4000:] if path.exists() else ""


async def instant(http: httpx.AsyncClient, expr: str) -> list[Any]:
    response = await http.get("/api/v1/query", params={"query": expr})
    body = response.json()
    assert body["status"] == "success", (expr, body)
    result: list[Any] = body["data"]["result"]
    return result


@needs_prometheus
async def test_prometheus_scrapes_a_worker_and_the_dashboard_queries_return_data(
    settings: Settings, redis: Redis, prometheus_factory: Any, tmp_path: Path
) -> None:
    worker_port, exporter_port = free_port(), free_port()
    env = worker_env(settings, metrics_port=str(worker_port), metrics_host="127.0.0.1",
                     queue_probe_interval_s="0.2", summary_every_user_turns="1")
    workers = WorkerProcesses(env, tmp_path, 1)
    exporter = start_exporter({**env, "MEMFLEET_METRICS_PORT": str(exporter_port)}, tmp_path)
    try:
        await schedule_memory_persistence(
            redis, "prom-s1", "prom-u1", [user_msg("I live in Lisbon."), user_msg("I use Rust.")],
            queue_name=settings.queue_name)
        url = prometheus_factory(worker_port, exporter_port)
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            await wait_ready(http, tmp_path / "prometheus.log")
            await poll(http, 'up{job="memfleet-worker"} == 1', lambda r: len(r) == 1, 30)
            await poll(http, 'up{job="memfleet-exporter"} == 1', lambda r: len(r) == 1, 30)
            # Two samples of the job counter in the window: rate() has something to say.
            await poll(http, "count_over_time(memfleet_jobs_total[1m])",
                       lambda r: r and float(r[0]["value"][1]) >= 2, 30)

            # Every dashboard expression is valid PromQL for this Prometheus.
            results = {}
            for expr in dashboard_exprs():
                results[expr] = await instant(http, with_rate_interval(expr, "30s"))

            def labels(expr: str, label: str) -> set[str]:
                # KeyError: the dashboard no longer has this panel query.
                return {r["metric"].get(label, "") for r in results[expr]}

            w, ri = 'job="memfleet-worker"', "[$__rate_interval]"
            (alive,) = results[f"count(up{{{w}}} == 1) or vector(0)"]
            assert alive["value"][1] == "1"
            outcomes = labels(f"sum by (outcome) (rate(memfleet_jobs_total{{{w}}}{ri}))", "outcome")
            assert "committed" in outcomes
            p95 = labels("histogram_quantile(0.95, sum by (le, stage) (rate("
                         f"memfleet_stage_duration_seconds_bucket{{{w}}}{ri})))", "stage")
            assert set(STAGES) <= p95
            e = 'job="memfleet-exporter"'
            depth = f"sum by (state) (max by (shard, state) (memfleet_queue_depth{{{e}}}))"
            assert labels(depth, "state") == {"ready", "in_progress", "orphaned", "deferred"}
            (lag,) = results[f"max(memfleet_fleet_lag_seconds{{{e}}})"]
            assert float(lag["value"][1]) >= 0
            events = labels(f"sum by (event) (rate(memfleet_decisions_total{{{w}}}{ri}))", "event")
            assert "ADD" in events
            commit_lag = results["histogram_quantile(0.95, sum by (le) (rate("
                                 f"memfleet_handover_lag_seconds_bucket{{{w}}}{ri})))"]
            assert len(commit_lag) == 1

            # The alert rules load and evaluate against the live series, and none fires.
            async def evaluated() -> list[dict[str, Any]]:
                groups = (await http.get("/api/v1/rules")).json()["data"]["groups"]
                return [rule for group in groups for rule in group["rules"]]

            # Evaluated, and quiet: a rule evaluated before the first scrapes landed
            # (an exporter not scraped yet reads as absent) clears at its next evaluation.
            deadline = time.monotonic() + 15
            rules = await evaluated()
            while any(r["lastEvaluation"].startswith("0001") or r["state"] != "inactive"
                      for r in rules) and time.monotonic() < deadline:
                await asyncio.sleep(0.25)
                rules = await evaluated()
            assert len(rules) == 10
            assert {(r["name"], r["health"]) for r in rules} == {
                ("MemfleetBacklogGrowing", "ok"), ("MemfleetFailureRateHigh", "ok"),
                ("MemfleetDeadLetters", "ok"), ("MemfleetWorkersStalled", "ok"),
                ("MemfleetLagHigh", "ok"), ("MemfleetScaledOutAndGrowing", "ok"),
                ("MemfleetExporterDown", "ok"), ("MemfleetExporterProbeFailing", "ok"),
            }
            assert [r for r in rules if r["state"] != "inactive"] == []
    finally:
        workers.stop()
        stop_process(exporter)
