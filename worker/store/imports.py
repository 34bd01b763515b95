"""What `memfleet import` reads and writes (worker.ops.importer): facts from a file or an
old system's blobs, written like any other change to a user's facts.

Each user's rows of a batch go in one transaction that takes the user's advisory
lock shared (as memfleet_commit_run does, so an erase or a consent change
serialises with it) and wins the user-version compare-and-set, so a
consolidation in flight re-reads. A row is left out when the user already has
its import key (the unique index) or, among active facts of the same agent,
its text (``normalised``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from worker.errors import UserVersionConflict
from worker.store import halfvec, queries
from worker.store.fence_key import FenceKeys
from worker.store.pool import PooledStore
from worker.store.translate import translated
from worker.store.types import FactTerms, Vector
from worker.store.versioned import CAS_ATTEMPTS

_SPACE = re.compile(r"\s+")


def normalised(text: str) -> str:
    """The form two texts are compared in: spacing, case and a final full stop aside
    (as extraction compares candidates)."""
    return _SPACE.sub(" ", text).strip().casefold().rstrip(".").rstrip()


@dataclass(frozen=True, slots=True)
class ImportRow:
    """One fact to write, with its identity in the source (``import_key``)."""

    user_id: str
    text: str
    category: str
    importance: int
    observed_at: datetime
    terms: FactTerms
    import_key: str
    pinned: bool = False

    @property
    def same_as(self) -> tuple[str, str | None, str]:
        """What makes two facts one: the user, the agent (None: profile) and the text."""
        return self.user_id, self.terms.agent_id, normalised(self.text)


@dataclass(frozen=True, slots=True)
class Written:
    """What one user's transaction did with their rows."""

    imported: int = 0
    duplicates: int = 0
    skipped: int = 0  # the user turned memory off, or was erased while the import ran


def _closed(enabled: bool, erased_at: datetime | None, fence: datetime | None) -> bool:
    """Whether the import leaves the user alone: memory is off for them, or they were
    erased after the import began (their fence is new or moved since). An erase
    before the import is no reason: the operator imports the file after it."""
    return not enabled or (erased_at is not None and erased_at != fence)


class ImportStore(PooledStore):
    def __init__(self, pool: Any, fences: FenceKeys) -> None:
        """``fences``: MEMFLEET_ERASE_FENCE_KEY's, to find users' erase fences."""
        super().__init__(pool)
        self._keys = fences
        self._q = queries.load("importer")

    async def fences(self) -> dict[bytes, datetime]:
        """The erase fences on record now (user key -> when the erase was made)."""
        async with translated("reading the erase fences"):
            rows = await self._pool.fetch(self._q["fences"])
        return {bytes(row["user_key"]): row["erased_at"] for row in rows}

    async def open_users(
        self, user_ids: Iterable[str], fences: dict[bytes, datetime], memory_default: bool,
    ) -> set[str]:
        """Those of ``user_ids`` the import may write for (and send to a model)."""
        users = sorted(set(user_ids))
        if not users:
            return set()
        async with translated("reading consent"):
            rows = await self._pool.fetch(self._q["user_gates"], users, memory_default,
                                          [self._keys.of(user) for user in users])
        return {row["user_id"] for row in rows if not _closed(
            row["enabled"], row["erased_at"], fences.get(self._keys.of(row["user_id"])))}

    async def known_keys(self, pairs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (user, import key) pairs already stored."""
        if not pairs:
            return set()
        async with translated("reading import keys"):
            rows = await self._pool.fetch(self._q["known_keys"], [p[0] for p in pairs],
                                          [p[1] for p in pairs])
        return {(row["user_id"], row["import_key"]) for row in rows}

    async def imported_blobs(self, pairs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (user, key prefix) pairs of which a row is stored already."""
        if not pairs:
            return set()
        async with translated("reading import keys"):
            rows = await self._pool.fetch(self._q["imported_blobs"], [p[0] for p in pairs],
                                          [p[1] for p in pairs])
        return {(row["user_id"], row["prefix"]) for row in rows}

    async def active_texts(self, user_ids: Iterable[str]) -> set[tuple[str, str | None, str]]:
        """(user, agent, normalised text) of the users' active, unexpired facts."""
        users = sorted(set(user_ids))
        if not users:
            return set()
        async with translated("reading active facts"):
            rows = await self._pool.fetch(self._q["active_texts"], users)
        return {(row["user_id"], row["agent_id"], normalised(row["text"])) for row in rows}

    async def write_user(
        self, user_id: str, rows: Sequence[ImportRow], embeddings: Vector, *,
        model: str, source_kind: str, fences: dict[bytes, datetime], memory_default: bool,
    ) -> Written:
        """All of ``rows`` (one user's; row i embedded as ``embeddings[i]``) that the user
        does not have yet, in one transaction; nothing when memory is off for them or
        they were erased after ``fences`` was read."""
        for _ in range(CAS_ATTEMPTS):
            try:
                async with translated("importing facts"), self._pool.acquire() as conn, \
                        conn.transaction():
                    return await self._write(conn, user_id, rows, embeddings, model,
                                             source_kind, fences.get(self._keys.of(user_id)),
                                             memory_default)
            except UserVersionConflict:
                continue  # a worker committed for this user a moment ago: read again
        raise UserVersionConflict()

    async def _write(
        self, conn: Any, user_id: str, rows: Sequence[ImportRow], embeddings: Vector,
        model: str, source_kind: str, fence: datetime | None, memory_default: bool,
    ) -> Written:
        await conn.execute(self._q["lock_user_shared"], user_id)
        gate = await conn.fetchrow(self._q["user_gate"], user_id, memory_default,
                                   self._keys.of(user_id))
        if _closed(gate["enabled"], gate["erased_at"], fence):
            return Written(skipped=len(rows))
        have = await self._texts(conn, user_id)
        keep: list[int] = []
        for i, row in enumerate(rows):
            same = row.same_as[1:]
            if same not in have:
                have.add(same)
                keep.append(i)
        if not keep:
            return Written(duplicates=len(rows))
        if await conn.fetchval(self._q["bump_user_version"], user_id, gate["version"]) is None:
            raise UserVersionConflict()
        chosen = [rows[i] for i in keep]
        terms = [row.terms for row in chosen]
        inserted = await conn.fetch(
            self._q["insert_facts"], user_id, model, source_kind,
            [r.text for r in chosen], [r.category for r in chosen],
            [r.importance for r in chosen], halfvec.encode_rows(embeddings[keep]),
            [r.observed_at for r in chosen], [t.scope for t in terms],
            [t.agent_id for t in terms], [t.valid_from for t in terms],
            [t.valid_to for t in terms], [t.expires_at for t in terms],
            [r.pinned for r in chosen], [t.basis for t in terms],
            [t.confidence for t in terms], [r.import_key for r in chosen],
        )
        return Written(imported=len(inserted), duplicates=len(rows) - len(inserted))

    async def _texts(self, conn: Any, user_id: str) -> set[tuple[str | None, str]]:
        rows = await conn.fetch(self._q["active_texts"], [user_id])
        return {(row["agent_id"], normalised(row["text"])) for row in rows}
