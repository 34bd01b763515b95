"""`memfleet reembed --model M --dim D`: move every active fact, and every active note
(docs/notes.md), to another embedding model and dimension while the fleet runs
(docs/operations.md).

- **User by user.** A user's rows still on another model are read with the
  user's version in one snapshot, embedded, and written back in one
  transaction that first wins the user-version compare-and-set every writer of
  a user's facts takes (memfleet_bump_user_version). A worker that read the
  user's neighbours before the move loses its own compare-and-set and reads
  them again, now on the new model (worker.pipeline.consolidate); a user whose
  facts changed while the move embedded them is read again (the vectors of
  texts already embedded are kept).
- **In place.** Only ``embedding`` and ``embedding_model`` change: the text, the
  times and the chain stay, nothing is inserted, so nothing can be duplicated.
- **Notes with their user's facts.** A user's active notes are read in the same
  snapshot, embedded in the same batches and written in the same transaction; a
  note that ended meanwhile (removed, promoted) rolls the user's move back and the
  user is read again, as for facts (notes do not bump the user's version).
- **Batched across users.** Each embeddings call takes up to ``batch`` texts,
  from as many users as it takes, through the fleet's model budget
  (worker.protection.budget) like the workers' calls.
- **Resumable.** What is left is what is still on another model: a move killed
  at any point and run again goes on from there.
- **Verified.** It loops until no active fact or note is left on another model
  (old workers may commit some meanwhile), then records the move finished: the
  fleet's model and dimension (memfleet_setting) become M and D.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from worker.config import Settings
from worker.errors import (
    ConfigurationError,
    MemfleetError,
    ModelBudgetBusy,
    ProviderAnswerInvalid,
)
from worker.providers.base import Embedder
from worker.providers.factory import build_embedder, embedding_model
from worker.store.base import MaintenanceStore
from worker.store.types import ActiveRows
from worker.vectors import Vector

# Users listed per pass: a pass's bookkeeping stays small whatever the fleet's size.
USERS_PER_PASS = 500
# Reads of one user in a pass while their facts keep changing under the move.
USER_ATTEMPTS = 5
# Passes in a row that move nobody, while users are left, before giving up.
STALLED_PASSES = 20
STALL_PAUSE_S = 0.5
MIN_DIM, MAX_DIM = 8, 16_000  # MEMFLEET_EMBED_DIM's bounds


@dataclass(frozen=True, slots=True)
class Target:
    model: str
    dim: int

    def check(self) -> None:
        if not self.model.strip():
            raise ConfigurationError("reembed needs a model name (--model)")
        if not MIN_DIM <= self.dim <= MAX_DIM:
            raise ConfigurationError(f"--dim must be between {MIN_DIM} and {MAX_DIM}")


@dataclass(slots=True)
class Counts:
    users: int = 0  # users whose move committed
    facts: int = 0  # facts re-embedded
    notes: int = 0  # notes re-embedded
    calls: int = 0  # embeddings calls
    reread: int = 0  # users read again: their facts changed under the move
    passes: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    target: Target
    counts: Counts
    active: int  # active facts at the end, every one on the target
    active_notes: int  # active notes at the end, every one on the target
    seconds: float

    def line(self) -> str:
        c = self.counts
        return (f"reembed {self.target.model} at {self.target.dim}: {c.users} users moved,"
                f" {c.facts} facts and {c.notes} notes re-embedded, {c.calls} embedding"
                f" calls, {self.seconds:.1f} s ({c.reread} users read again);"
                f" verified: {self.active} active facts and {self.active_notes} active notes,"
                f" all on {self.target.model} at {self.target.dim}")


@dataclass(slots=True)
class UserMove:
    """One user's rows still to move, read at ``version``; vectors filled batch by batch.
    ``texts`` and ``vectors`` hold the facts (``ids``), then the notes (``note_ids``)."""

    user_id: str
    version: int
    ids: list[int]
    texts: list[str]
    vectors: list[Vector | None]
    attempt: int = 1
    note_ids: list[int] = field(default_factory=list)

    def waiting(self) -> list[int]:
        return [i for i, vector in enumerate(self.vectors) if vector is None]

    @property
    def complete(self) -> bool:
        return all(vector is not None for vector in self.vectors)

    def known(self) -> dict[str, Vector]:
        """The vectors already made, by text: a reread embeds only what is new."""
        return {text: v for text, v in zip(self.texts, self.vectors, strict=True)
                if v is not None}


def next_batch(pending: list[UserMove], size: int) -> list[tuple[UserMove, int]]:
    """The next ``size`` texts without a vector, users in the order they were read."""
    return [(user, i) for user in pending for i in user.waiting()][:size]


@dataclass(slots=True)
class Mover:
    store: MaintenanceStore
    embedder: Embedder
    target: Target
    batch: int
    counts: Counts = field(default_factory=Counts)

    async def run(self, progress: Callable[[Counts], None] | None = None) -> ActiveRows:
        """Move everyone, verify, record the move finished; the active rows at the end."""
        model, dim = self.target.model, self.target.dim
        stalled = 0
        while True:
            users = await self.store.users_left(model, dim, USERS_PER_PASS)
            if not users:
                active = await self.store.finish_reembed(model, dim)
                if active is not None:
                    return active
                continue  # rows on another model came in meanwhile: another pass
            self.counts.passes += 1
            moved = await self.move(users)
            if progress is not None:
                progress(self.counts)
            stalled = 0 if moved else stalled + 1
            if stalled >= STALLED_PASSES:
                raise MemfleetError(f"the facts or notes of {len(users)} users kept changing"
                                    " during the move: run `memfleet reembed` again")
            if not moved:
                await asyncio.sleep(STALL_PAUSE_S)

    async def move(self, users: list[str]) -> int:
        """One pass over ``users``; how many moves committed."""
        queue: deque[tuple[str, int, dict[str, Vector]]] = deque((u, 1, {}) for u in users)
        pending: list[UserMove] = []
        moved = 0
        while queue or pending:
            while queue and sum(len(u.waiting()) for u in pending) < self.batch:
                user = await self._read(*queue.popleft())
                if user is not None:
                    pending.append(user)
            slots = next_batch(pending, self.batch)
            if slots:
                vectors = await self._embed([user.texts[i] for user, i in slots])
                for (user, i), vector in zip(slots, vectors, strict=True):
                    user.vectors[i] = vector
            for user in [u for u in pending if u.complete]:
                pending.remove(user)
                if await self._commit(user):
                    moved += 1
                elif user.attempt < USER_ATTEMPTS:
                    self.counts.reread += 1
                    queue.append((user.user_id, user.attempt + 1, user.known()))
        return moved

    async def _read(self, user_id: str, attempt: int, known: dict[str, Vector]) -> UserMove | None:
        rows = await self.store.rows_to_move(user_id, self.target.model, self.target.dim)
        if not rows.ids and not rows.note_ids:
            return None
        texts = rows.texts + rows.note_texts
        return UserMove(user_id, rows.version, rows.ids, texts,
                        [known.get(text) for text in texts], attempt, rows.note_ids)

    async def _embed(self, texts: list[str]) -> Vector:
        while True:
            try:
                answer = await self.embedder.embed(texts)
            except ModelBudgetBusy:
                continue  # the fleet is as busy as its budget allows: wait our turn again
            self.counts.calls += 1
            if answer.value.shape != (len(texts), self.target.dim):
                raise ProviderAnswerInvalid("the embeddings do not match the request")
            return answer.value

    async def _commit(self, user: UserMove) -> bool:
        """The user's move in one transaction; False when their facts changed since the read."""
        matrix = np.stack([v for v in user.vectors if v is not None])
        facts = len(user.ids)
        if not await self.store.move_user(user.user_id, user.version, user.ids, matrix[:facts],
                                          model=self.target.model, dim=self.target.dim,
                                          note_ids=user.note_ids, note_embeddings=matrix[facts:]):
            return False
        self.counts.users += 1
        self.counts.facts += facts
        self.counts.notes += len(user.note_ids)
        return True


async def reembed(
    store: MaintenanceStore, embedder: Embedder, target: Target, *, batch: int,
    progress: Callable[[Counts], None] | None = None,
) -> Outcome:
    """The whole move, under a lock that keeps a second ``reembed`` from running with it."""
    target.check()
    if batch < 1:
        raise ConfigurationError("--batch must be at least 1")
    if (embedder.model, embedder.dim) != (target.model, target.dim):
        raise ConfigurationError("the embedder does not embed with the move's model")
    started = time.monotonic()
    mover = Mover(store, embedder, target, batch)
    async with store.claim_reembed(target.model, target.dim) as claimed:
        if not claimed:
            raise MemfleetError("another memfleet reembed is running")
        active = await mover.run(progress)
    return Outcome(target, mover.counts, active.facts, active.notes,
                   time.monotonic() - started)


def reembed_embedder(settings: Settings, target: Target, redis: Any) -> Embedder:
    """The embedder of the move: the settings' provider, endpoint and key, ``target``'s
    model and dimension, and the fleet's model budget in ``redis``."""
    target.check()
    if settings.embed_provider == "hashing" and target.model != embedding_model(settings):
        # Hashing workers write their one model name whatever MEMFLEET_EMBED_MODEL says.
        raise ConfigurationError(f"the hashing embeddings provider only embeds with"
                                 f" {embedding_model(settings)}: only --dim can change")
    return build_embedder(settings, target.model, target.dim, redis=redis)


async def run_reembed(
    settings: Settings, target: Target, *, batch: int,
    progress: Callable[[Counts], None] | None = None,
) -> Outcome:
    """``memfleet reembed``: its own store, Redis client and embedder, closed at the end."""
    from redis.asyncio import Redis

    from worker.store.maintenance import PostgresMaintenanceStore

    redis = Redis.from_url(settings.redis_url or "")
    embedder = reembed_embedder(settings, target, redis)
    try:
        store = await PostgresMaintenanceStore.connect(settings.database_url or "")
        try:
            return await reembed(store, embedder, target, batch=batch, progress=progress)
        finally:
            await store.aclose()
    finally:
        close = getattr(embedder, "aclose", None)
        if close is not None:
            await close()
        await redis.aclose()
