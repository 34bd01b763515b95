"""Embed stage: every candidate of the run in ONE embeddings call."""

from __future__ import annotations

from collections.abc import Sequence

from worker.errors import ProviderAnswerInvalid
from worker.pipeline.context import RunContext, ask
from worker.pipeline.extract import CandidateFact
from worker.pipeline.notes import CandidateNote
from worker.vectors import Vector, empty


async def run(ctx: RunContext, candidates: Sequence[CandidateFact],
              notes: Sequence[CandidateNote] = ()) -> Vector:
    """A float32 matrix, one unit-length row per candidate, in their order, then one per
    note (docs/notes.md): still one call per job."""
    embedder = ctx.providers.embedder
    texts = [c.text for c in candidates] + [n.text for n in notes]
    if not texts:
        return empty(embedder.dim)
    with ctx.clock.stage("embed"):
        answer = await ask(ctx, "embeddings", embedder, lambda: embedder.embed(texts))
    if answer.value.shape != (len(texts), embedder.dim):
        raise ProviderAnswerInvalid("the embeddings do not match the request")
    # The similarity, the neighbour query and the inserts all read this matrix as it is.
    return answer.value
