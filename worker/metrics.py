"""A worker process's OpenTelemetry instruments: what the process does.

The pipeline, the providers and the fleet's job record into ``Metrics``; it is
exported over OTLP and on the process's /metrics (worker.fleet.metrics). Labels
never carry user content or ids: only stage, outcome, event, model, direction,
kind.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from opentelemetry.metrics import CallbackOptions, Meter, Observation


@dataclass
class Metrics:
    """The instruments the pipeline records into; names match the Grafana dashboard."""

    meter: Meter
    # The ids of the jobs this process runs: counted here, named in its heartbeat
    # (worker.fleet.probe).
    running: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        m = self.meter
        self.jobs = m.create_counter("memfleet.jobs", "{job}", "Jobs by outcome")
        self.stage_duration = m.create_histogram(
            "memfleet.stage.duration", "s", "Duration of each pipeline stage",
            explicit_bucket_boundaries_advisory=[
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                10, 30, 60,
            ],
        )
        self.decisions = m.create_counter("memfleet.decisions", "{decision}",
                                          "Consolidation decisions applied, by event")
        self.tokens = m.create_counter("memfleet.llm.tokens", "{token}",
                                       "LLM tokens by model and direction")
        self.llm_errors = m.create_counter("memfleet.llm.errors", "{error}",
                                           "LLM and embedding failures by kind")
        self.lock_contention = m.create_counter(
            "memfleet.lock.contention", "{job}", "Jobs that found the session lock busy")
        self.recovered = m.create_counter(
            "memfleet.sessions.recovered", "{session}",
            "Sessions a dead worker left locked, queued again by the recovery pass")
        self.breaker_trips = m.create_counter(
            "memfleet.llm.breaker.trips", "{trip}",
            "Times a job opened the fleet's circuit breaker on the model endpoint")
        # The fleet's model budget (worker.protection.budget).
        self.budget_wait = m.create_histogram(
            "memfleet.llm.budget.wait", "s",
            "Time a model call waited for the fleet's budget before it was sent",
            explicit_bucket_boundaries_advisory=[
                0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
            ],
        )
        self.budget_waits = m.create_counter(
            "memfleet.llm.budget.waits", "{call}",
            "Model calls that had to wait for the budget, by the first reason"
            " (rpm, tpm, concurrency, paused)")
        self.budget_pauses = m.create_counter(
            "memfleet.llm.budget.pauses", "{pause}",
            "Fleet-wide pauses of the model calls set after a 429 with Retry-After")
        self.expired = m.create_counter(
            "memfleet.facts.expired", "{fact}",
            "Facts past their expires_at superseded by this process's expiry pass")
        # Who each candidate fact is about (docs/persons.md): user, person (one stored),
        # new_person, ambiguous (dropped), renamed (a rename only: in the label). Never a
        # name.
        self.attributions = m.create_counter(
            "memfleet.persons.attributions", "{fact}",
            "Candidate facts by who they are about (user, person, new_person, ambiguous, "
            "renamed)")
        # Notes beside facts (docs/notes.md): counts only, never their text.
        self.notes = m.create_counter(
            "memfleet.notes", "{note}", "Notes of committed runs, by event (ADD, UPDATE, NONE)")
        self.notes_promoted = m.create_counter(
            "memfleet.notes.promoted", "{note}",
            "Notes the promotion job made part of a fact, by result (added, covered)")
        self.refused_cas = m.create_counter(
            "memfleet.cas.refused", "{commit}",
            "Persist transactions refused by a compare-and-set, by fence")
        # The user's portrait (worker.fleet.portrait_job, docs/portrait.md).
        self.portrait_refreshes = m.create_counter(
            "memfleet.portrait.refreshes", "{refresh}",
            "Portrait refreshes by outcome (written, unchanged: no model call, memory_off,"
            " not_wanted, no_facts, fenced, deferred, failed, ...)")
        self.portrait_debounced = m.create_counter(
            "memfleet.portrait.debounced", "{commit}",
            "Commits that joined a portrait refresh already queued for their user")
        self.lag = m.create_histogram(
            "memfleet.handover.lag", "s", "From hand-over to the commit of its slice",
            explicit_bucket_boundaries_advisory=[
                0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800,
            ],
        )
        m.create_observable_gauge("memfleet.worker.running_jobs", [self._observe_running],
                                  "{job}", "Jobs running in this worker process")

    def _observe_running(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(len(self.running))
