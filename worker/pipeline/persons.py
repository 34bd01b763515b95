"""The persons part of a run (docs/persons.md): the user's persons read for the
extraction request, and each candidate attributed to the user or to one of them
before consolidation compares it with the facts about the same person.

While MEMFLEET_PERSONS is off nothing here runs: the request carries no "people",
and every candidate is the user's, as before persons.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from opentelemetry import trace

from worker.pipeline.attribution import attribute
from worker.pipeline.context import RunContext
from worker.pipeline.extract import CandidateFact
from worker.providers.wire import KnownPerson
from worker.store.person_types import ExistingPerson, NewPerson, PersonRecord, PersonWrites
from worker.vectors import Vector


async def read_known(ctx: RunContext, user_id: str) -> list[PersonRecord] | None:
    """The user's persons (unmerged), or None while persons are off."""
    if not ctx.settings.persons:
        return None
    with ctx.clock.span(
        "SELECT memory_person", trace.SpanKind.CLIENT,
        {"db.system.name": "postgresql", "db.operation.name": "SELECT",
         "db.collection.name": "memory_person"},
    ):
        return await ctx.store.known_persons(user_id)


def people_of(persons: Sequence[PersonRecord] | None) -> tuple[KnownPerson, ...] | None:
    """The request's "people": how each known person is called (no ids: the model names
    them as the user does)."""
    if persons is None:
        return None
    return tuple(KnownPerson(name=p.display_name, relation=p.relation, aliases=p.aliases)
                 for p in persons)


def attributed(
    ctx: RunContext, candidates: Sequence[CandidateFact], embeddings: Vector,
    persons: Sequence[PersonRecord],
) -> tuple[list[CandidateFact], Vector, PersonWrites]:
    """The candidates kept, each with the person it is about in its terms, their
    embeddings' rows, and the persons the run writes. A candidate about someone the
    mention does not single out is dropped (counted, never kept as the user's)."""
    done = attribute(persons, [c.about for c in candidates])
    kept = [replace(candidates[i], terms=replace(candidates[i].terms, person=about))
            for i, about in zip(done.kept, done.about, strict=True)]
    span = trace.get_current_span()
    counts = {
        "user": sum(1 for a in done.about if a is None),
        "person": sum(1 for a in done.about if isinstance(a, ExistingPerson)),
        "new_person": sum(1 for a in done.about if isinstance(a, NewPerson)),
        "ambiguous": done.dropped,
        "renamed": done.renamed,  # a rename and nothing more: in the label, no fact
    }
    for outcome, count in counts.items():
        span.set_attribute(f"memfleet.persons.{outcome}", count)
        metrics = ctx.clock.metrics
        if count and metrics is not None:
            metrics.attributions.add(count, {"outcome": outcome})
    span.set_attribute("memfleet.persons.created", len(done.writes.create))
    span.set_attribute("memfleet.persons.relabelled", len(done.writes.relabel))
    rows = embeddings[list(done.kept)] if len(done.kept) < len(candidates) else embeddings
    return kept, rows, done.writes
