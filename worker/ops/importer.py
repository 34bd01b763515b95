"""`memfleet import`: facts from a JSONL file, or an old system's memory blobs through
extraction, written idempotently (docs/memory_model.md, "Import").

- ``--file``: one fact a line (worker.ops.import_lines), written with
  ``source_kind = imported``.
- ``--legacy``: one free-text blob a line, cut in pieces that each go through
  the extraction pass as one user message (the configured extractor), written
  with ``source_kind = backfill``. A blob of which a fact is stored already is
  not sent again: its facts were written together, in one transaction.

Either way the facts are embedded a batch at a time (one embeddings call per
batch, within the fleet's model budget when one is set) and each user's rows of
a batch are written in one transaction (worker.store.imports). Nothing of a user
whose memory is off, or who is erased while the import runs, is sent to a model
or written. Counts only, never text, are reported and logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import BinaryIO

import numpy as np

from worker.config import Settings, secret
from worker.errors import ProviderAnswerInvalid
from worker.memory_rules import Limits
from worker.ops.import_lines import (
    BadLine,
    LegacyBlob,
    chunk_chars,
    chunks,
    parse_fact_line,
    parse_legacy_line,
)
from worker.pipeline.extract import candidates_from, observed_label
from worker.providers.base import Embedder, Extractor
from worker.providers.wire import ExtractionRequest, WireMessage
from worker.store.fence_key import fence_keys
from worker.store.imports import ImportRow, ImportStore

# One embeddings call per batch: at most this many texts, or this many characters
# in all (a request must stay within what an endpoint takes at once).
BATCH_ROWS = 100
BATCH_CHARS = 100_000

OnProblem = Callable[[int, str], None]  # (line number, reason): never the line itself


@dataclass(slots=True)
class ImportReport:
    """Lines: ``read`` (not blank), ``invalid``, ``skipped`` (memory off, or erased
    while the import ran). Facts: ``imported``, ``duplicates`` (a key or a text the
    user has already). With --file a line is a fact."""

    read: int = 0
    imported: int = 0
    duplicates: int = 0
    invalid: int = 0
    skipped: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @property
    def usable(self) -> int:
        return self.read - self.invalid


@dataclass(slots=True)
class LegacyReport(ImportReport):
    """Also: ``already_imported`` and ``failed`` blobs (lines; extraction's answer was
    unusable: the next run tries them again), the facts ``extracted``, and the
    model's tokens."""

    already_imported: int = 0
    failed: int = 0
    extracted: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def usable(self) -> int:
        return self.read - self.invalid - self.failed


def numbered_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The file's lines that are not blank, numbered from 1 as an editor shows them."""
    for number, raw in enumerate(stream, start=1):
        if raw.strip():
            yield number, raw


class _Writer:
    """Rows gathered into batches: deduplicated, embedded in one call, written per user."""

    def __init__(self, store: ImportStore, embedder: Embedder, source_kind: str,
                 fences: dict[bytes, datetime], memory_default: bool,
                 report: ImportReport) -> None:
        self._store, self._embedder, self._source_kind = store, embedder, source_kind
        self._fences, self._memory_default, self._report = fences, memory_default, report
        self._rows: list[tuple[int, ImportRow]] = []
        self._chars = 0

    def add(self, line: int, rows: Iterable[ImportRow]) -> None:
        for row in rows:
            self._rows.append((line, row))
            self._chars += len(row.text)

    @property
    def full(self) -> bool:
        return len(self._rows) >= BATCH_ROWS or self._chars >= BATCH_CHARS

    async def flush(self) -> None:
        pending, self._rows, self._chars = self._rows, [], 0
        if not pending:
            return
        report, store = self._report, self._store
        users = {row.user_id for _, row in pending}
        open_users = await store.open_users(users, self._fences, self._memory_default)
        report.skipped += len({line for line, row in pending if row.user_id not in open_users})
        pending = [(line, row) for line, row in pending if row.user_id in open_users]
        known = await store.known_keys(sorted({(r.user_id, r.import_key) for _, r in pending}))
        have = await store.active_texts(open_users)
        fresh: list[tuple[int, ImportRow]] = []
        for line, row in pending:
            key = (row.user_id, row.import_key)
            if key in known or row.same_as in have:
                report.duplicates += 1
                continue
            known.add(key)
            have.add(row.same_as)
            fresh.append((line, row))
        if not fresh:
            return
        vectors = (await self._embedder.embed([row.text for _, row in fresh])).value
        by_user: dict[str, list[int]] = {}
        for i, (_, row) in enumerate(fresh):
            by_user.setdefault(row.user_id, []).append(i)
        for user_id, picked in by_user.items():
            written = await store.write_user(
                user_id, [fresh[i][1] for i in picked], vectors[np.array(picked)],
                model=self._embedder.model, source_kind=self._source_kind,
                fences=self._fences, memory_default=self._memory_default)
            report.imported += written.imported
            report.duplicates += written.duplicates
            if written.skipped:
                report.skipped += len({fresh[i][0] for i in picked})


async def import_facts(
    lines: Iterable[tuple[int, bytes]], store: ImportStore, embedder: Embedder, *,
    limits: Limits, memory_default: bool, on_problem: OnProblem,
    report: ImportReport | None = None,
) -> ImportReport:
    """`memfleet import --file`: every usable line written once, however often it runs."""
    report = report if report is not None else ImportReport()
    now = datetime.now(UTC)
    writer = _Writer(store, embedder, "imported", await store.fences(), memory_default, report)
    for number, raw in lines:
        report.read += 1
        parsed = parse_fact_line(raw, limits, now)
        if isinstance(parsed, BadLine):
            report.invalid += 1
            on_problem(number, parsed.reason)
            continue
        writer.add(number, [parsed])
        if writer.full:
            await writer.flush()
    await writer.flush()
    return report


async def _extract(extractor: Extractor, blob: LegacyBlob, now: datetime, limits: Limits,
                   report: LegacyReport) -> list[ImportRow]:
    # The blob goes as what the user said: extraction records what the user stated
    # about themselves (the rules provider reads user messages only, and the
    # prompt leaves out what only the assistant said), and an old memory of the
    # user is exactly that.
    observed = blob.observed_at or now
    rows: list[ImportRow] = []
    for piece in chunks(blob.text, chunk_chars(limits)):
        request = ExtractionRequest(observed_at=observed_label(observed), summary=None,
                                    context=(), messages=(WireMessage(role="user",
                                                                      content=piece),))
        answer = await extractor.extract(request)
        report.input_tokens += answer.usage.input_tokens
        report.output_tokens += answer.usage.output_tokens
        for fact in candidates_from(answer.value, observed_at=observed, source="backfill"):
            rows.append(ImportRow(
                user_id=blob.user_id, text=fact.text, category=fact.category,
                importance=fact.importance, observed_at=observed, terms=fact.terms,
                import_key=blob.import_key(fact.text)))
    return rows


async def import_legacy(
    lines: Iterable[tuple[int, bytes]], store: ImportStore, extractor: Extractor,
    embedder: Embedder, *, limits: Limits, memory_default: bool, on_problem: OnProblem,
    report: LegacyReport | None = None,
) -> LegacyReport:
    """`memfleet import --legacy`: one blob at a time through extraction."""
    report = report if report is not None else LegacyReport()
    now = datetime.now(UTC)
    fences = await store.fences()
    writer = _Writer(store, embedder, "backfill", fences, memory_default, report)
    for number, raw in lines:
        report.read += 1
        blob = parse_legacy_line(raw, limits)
        if isinstance(blob, BadLine):
            report.invalid += 1
            on_problem(number, blob.reason)
            continue
        if await store.imported_blobs([(blob.user_id, blob.key_prefix)]):
            report.already_imported += 1
            continue
        if not await store.open_users([blob.user_id], fences, memory_default):
            report.skipped += 1
            continue
        try:
            rows = await _extract(extractor, blob, now, limits, report)
        except ProviderAnswerInvalid:
            report.failed += 1
            on_problem(number, "extraction's answer was unusable; the next run tries again")
            continue
        report.extracted += len(rows)
        writer.add(number, rows)
        if writer.full:
            await writer.flush()
    await writer.flush()
    return report


async def run_import(
    settings: Settings, stream: BinaryIO, *, legacy: bool, on_problem: OnProblem,
    on_report: Callable[[ImportReport], None],
) -> ImportReport:
    """The command: the store, Redis (the fleet's model budget) and the providers of
    ``settings`` (resolved), for the one run. ``on_report`` gets the counts even
    when the run stops on an error, so an operator sees how far it got."""
    from redis.asyncio import Redis

    from worker.providers.factory import build_providers

    report: ImportReport = LegacyReport() if legacy else ImportReport()
    limits = Limits.from_settings(settings)
    redis = Redis.from_url(settings.redis_url or "")
    providers = None
    store: ImportStore | None = None
    try:
        providers = build_providers(settings, redis=redis)
        store = await ImportStore.connect(
            settings.database_url or "",
            fences=fence_keys(secret(settings.erase_fence_key), settings.home_dir))
        lines = numbered_lines(stream)
        if isinstance(report, LegacyReport):
            await import_legacy(lines, store, providers.extractor, providers.embedder,
                                limits=limits, memory_default=settings.memory_default,
                                on_problem=on_problem, report=report)
        else:
            await import_facts(lines, store, providers.embedder, limits=limits,
                               memory_default=settings.memory_default,
                               on_problem=on_problem, report=report)
    finally:
        on_report(report)
        if providers is not None:
            await providers.aclose()
        await redis.aclose()
        if store is not None:
            await store.aclose()
    return report
