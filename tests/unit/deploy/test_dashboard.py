"""The Grafana dashboard and the alert rules query only metrics the worker and the fleet's
exporter export.

The known metrics are not a hand-kept list: they are rendered by the real
``setup_telemetry`` and ``worker.fleet.metrics_exporter.fleet_meter`` after one sample of every
instrument, so renaming an instrument, its unit or a label breaks this test
instead of leaving a panel silently empty. tests/integration/fleet/test_observability.py checks
the same against a real worker's /metrics after real jobs.

The helpers here (PromQL extraction and checking) are imported by the
integration tests too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from worker.config import Settings
from worker.fleet.metrics_exporter import fleet_meter
from worker.fleet.probe import FleetSnapshot
from worker.outcomes import Outcome
from worker.protection.budget import REASONS
from worker.telemetry import StageClock, setup_telemetry

ROOT = Path(__file__).resolve().parents[3]
OBSERVABILITY = ROOT / "deploy" / "observability"
DASHBOARD = OBSERVABILITY / "grafana" / "dashboards" / "memfleet.json"
ALERTS = OBSERVABILITY / "prometheus" / "alerts.yml"

# The label values the code records: every outcome a job can end with (worker.outcomes;
# tests/unit/fleet/test_outcomes.py pins their names).
OUTCOMES = tuple(Outcome)
STAGES = ("lock", "cursor", "extract", "embed", "consolidate", "persist", "summary")
EVENTS = ("ADD", "UPDATE", "DELETE", "NONE", "REJECTED")
FENCES = ("cursor", "user")
BUDGET_REASONS = tuple(REASONS.values())
# Added by Prometheus to every scraped series; `le` comes with histogram buckets.
SCRAPE_LABELS = frozenset({"job", "instance"})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_GRAFANA_VAR = re.compile(r"\$(?:\{[^}]*\}|\w+)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_SELECTOR = re.compile(r"\b(memfleet_[A-Za-z0-9_]+|up)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")


# ---- extraction (shared with the integration tests) ---------------------------------------

def load_dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def walk_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        # Collapsed rows keep their panels inside the row.
        yield from walk_panels(panel.get("panels", []))


def dashboard_exprs(dashboard: dict[str, Any] | None = None) -> list[str]:
    """Every PromQL expression of the dashboard (Tempo targets carry `query`, not `expr`)."""
    dashboard = dashboard or load_dashboard()
    exprs = [t["expr"] for p in walk_panels(dashboard["panels"]) for t in p.get("targets", [])
             if "expr" in t]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable.get("query")
            exprs.append(query["query"] if isinstance(query, dict) else str(query))
    return exprs


def alert_exprs() -> dict[str, str]:
    rules = yaml.safe_load(ALERTS.read_text())
    return {f"{rule['alert']}#{i}": rule["expr"]
            for group in rules["groups"] for i, rule in enumerate(group["rules"])}


def metric_names(expr: str) -> set[str]:
    """Identifiers that name memfleet metrics or `up`; strings and Grafana variables removed.
    (kube_* series in the alerts come from kube-state-metrics, not from memfleet.)"""
    bare = _GRAFANA_VAR.sub("1m", _STRING.sub('""', expr))
    return {name for name in _IDENT.findall(bare) if name.startswith("memfleet_") or name == "up"}


def dashboard_metric_names(job: str | None = None) -> set[str]:
    """The metrics the dashboard reads (``job``: of that scrape job only)."""
    return set().union(*(metric_names(e) for e in dashboard_exprs()
                         if job is None or f'job="{job}"' in e))


def with_rate_interval(expr: str, interval: str) -> str:
    """The expression as Grafana sends it, with its range variables filled in."""
    return re.sub(r"\$__(?:rate_)?interval|\$\{__(?:rate_)?interval\}", interval, expr)


# ---- the real exporter ------------------------------------------------------------------

def render_known_metrics() -> str:
    """/metrics text after one sample of every instrument, through the real code paths."""
    telemetry = setup_telemetry(Settings(otel_exporter="none", metrics_port=None),
                                span_exporter=InMemorySpanExporter())
    metrics = telemetry.metrics
    clock = StageClock(telemetry.tracer, metrics)
    for stage in STAGES:
        with clock.stage(stage):
            pass
    with clock.provider_call("chat", "openai", "gpt-4o-mini") as done:
        done("gpt-4o-mini", 10, 3)
    # The rest mirror the attributes of job.py and pipeline.py.
    for outcome in OUTCOMES:
        metrics.jobs.add(1, {"outcome": outcome})
    for event in EVENTS:
        metrics.decisions.add(1, {"event": event})
    for fence in FENCES:
        metrics.refused_cas.add(1, {"fence": fence})
    metrics.llm_errors.add(1, {"kind": "server_error"})
    metrics.lock_contention.add(1)
    metrics.lag.record(0.5)
    metrics.budget_wait.record(0.2)
    for reason in BUDGET_REASONS:
        metrics.budget_waits.add(1, {"reason": reason})
    metrics.budget_pauses.add(1)
    try:
        return telemetry.render_metrics().decode() + render_exporter_metrics()
    finally:
        telemetry.shutdown()


def render_exporter_metrics() -> str:
    """The fleet exporter's /metrics text (worker.fleet.metrics_exporter), through the real code."""
    registry = CollectorRegistry()
    provider, metrics = fleet_meter(registry)
    metrics.fleet["default"] = FleetSnapshot(ready=3, deferred=1, in_progress=2, orphaned=1,
                                  oldest_ready_age_s=1.5, lag_s=4.0, sessions_waiting=5,
                                  workers=2)
    metrics.probe_ok["default"], metrics.probed_at["default"] = True, 1_765_000_000.0
    try:
        return bytes(generate_latest(registry)).decode()
    finally:
        provider.shutdown()


def exported(text: str) -> dict[str, dict[str, set[str]]]:
    """Sample name -> label name -> values seen, from Prometheus text."""
    out: dict[str, dict[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = out.setdefault(sample.name, {})
            for key, value in sample.labels.items():
                labels.setdefault(key, set()).add(value)
    return out


def problems(
    expr: str, known: dict[str, dict[str, set[str]]], *, values: bool = True
) -> list[str]:
    """What in ``expr`` does not exist in ``known``: names, matcher labels, groupings, and
    (``values``) matcher values, which a scrape only has once such an event happened."""
    found: list[str] = []
    names = metric_names(expr)
    for name in sorted(names - set(known) - {"up"}):
        found.append(f"unknown metric {name}")
    for name, body in _SELECTOR.findall(expr):
        if name == "up" or name not in known:
            continue
        labels = known[name]
        for label, op, value in _MATCHER.findall(body):
            if label in SCRAPE_LABELS:
                continue
            if label not in labels:
                found.append(f"{name} has no label {label}")
                continue
            if not values:
                continue
            # A typo in a != or !~ matcher would silently match everything: check them too.
            wanted = value.split("|") if op in ("=~", "!~") else [value]
            found += [f"{name}{{{label}}} never takes the value {v!r}"
                      for v in wanted if v not in labels[label]]
    available = SCRAPE_LABELS | {"le"}
    for name in names:
        available |= set(known.get(name, {}))
    for group in _GROUPING.findall(expr):
        for label in filter(None, (g.strip() for g in group.split(","))):
            if label not in available:
                found.append(f"grouping by unknown label {label}")
    return found


# ---- tests --------------------------------------------------------------------------------

def test_the_dashboard_queries_only_what_the_worker_exports() -> None:
    known = exported(render_known_metrics())
    exprs = dashboard_exprs()
    assert len(exprs) >= 20
    errors = {expr: problems(expr, known) for expr in exprs}
    assert {e: p for e, p in errors.items() if p} == {}


def test_every_exported_metric_has_a_panel() -> None:
    """A new instrument shows up on the dashboard, or this test says which one is missing."""
    families = {f.name for f in text_string_to_metric_families(render_known_metrics())}
    used = dashboard_metric_names()
    missing = {family for family in families - {"target_info"}
               if not any(name == family or name.startswith(family + "_") for name in used)}
    assert missing == set()
    assert "up" in used  # workers alive


def test_the_alerts_query_only_what_the_worker_exports() -> None:
    known = exported(render_known_metrics())
    exprs = alert_exprs()
    assert {name.split("#")[0] for name in exprs} == {
        "MemfleetBacklogGrowing", "MemfleetFailureRateHigh", "MemfleetWorkersStalled",
        "MemfleetDeadLetters", "MemfleetLagHigh", "MemfleetScaledOutAndGrowing",
        "MemfleetExporterDown", "MemfleetExporterProbeFailing",
    }
    errors = {name: problems(expr, known) for name, expr in exprs.items()}
    assert {n: p for n, p in errors.items() if p} == {}


def test_the_checker_catches_drift() -> None:
    known = exported(render_known_metrics())
    assert problems('sum(rate(memfleet_job_total{job="memfleet-worker"}[1m]))', known) == [
        "unknown metric memfleet_job_total"]
    assert problems('sum(rate(memfleet_jobs_total{outcome="comitted"}[1m]))', known) == [
        "memfleet_jobs_total{outcome} never takes the value 'comitted'"]
    assert problems('sum by (fence) (rate(memfleet_jobs_total{kind!="x"}[1m]))', known) == [
        "memfleet_jobs_total has no label kind", "grouping by unknown label fence"]
    assert metric_names('rate(memfleet_jobs_total{outcome="memfleet_x"}[$__rate_interval])') == {
        "memfleet_jobs_total"}


def test_panels_use_the_datasource_variables() -> None:
    dashboard = load_dashboard()
    variables = {v["name"] for v in dashboard["templating"]["list"] if v["type"] == "datasource"}
    assert variables == {"datasource", "tempo"}
    panels = [p for p in walk_panels(dashboard["panels"]) if p["type"] != "row"]
    ids = [p["id"] for p in walk_panels(dashboard["panels"])]
    assert len(ids) == len(set(ids))
    for panel in panels:
        for target in panel["targets"]:
            uid = target["datasource"]["uid"]
            kind = target["datasource"]["type"]
            assert (kind, uid) in {("prometheus", "${datasource}"), ("tempo", "${tempo}")}, panel
        assert panel.get("description"), f"panel {panel['title']!r} says nothing about itself"
    titles = [p["title"] for p in walk_panels(dashboard["panels"]) if p["type"] == "row"]
    assert len(titles) >= 6
