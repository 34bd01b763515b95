"""The notes' promotion job (docs/notes.md): recurring notes become a fact.

Every worker with notes on runs a pass every MEMFLEET_NOTES_PROMOTE_INTERVAL_S,
one at a time in the fleet (an advisory lock: the others skip their turn). A
pass looks at up to MEMFLEET_NOTES_PROMOTE_USERS users whose memory is on and
who have an active note newer than the last look, clusters each user's active
notes (worker.ops.note_clusters: closer than MEMFLEET_NOTES_PROMOTE_DISTANCE,
from at least MEMFLEET_NOTES_PROMOTE_SESSIONS sessions), and for each cluster:

1. asks the promotion pass for the fact's text (a model: one small call per
   cluster; the rules provider: the newest note's text, deterministic);
2. embeds the texts (one call per user) and reads the user's nearest active
   fact for each: one closer than the distance already says it, and takes the
   notes instead of a new fact;
3. promotes in one transaction that writes only if every note of the cluster is
   still active (worker.store.note_promotion): two passes, or a pass beside the
   user's removal or an erase, promote a cluster once or not at all.

No model call happens inside a transaction. Spans and metrics carry counts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog
from opentelemetry import trace

from worker.errors import ProviderAnswerInvalid
from worker.ops.note_clusters import Cluster, clusters
from worker.providers.base import Embedder, NotePromoter
from worker.providers.wire import NotePromotionRequest, PromotedFact, PromotionNote
from worker.store.base import NotePromotionStore
from worker.store.note_types import Promotion

if TYPE_CHECKING:
    from worker.config import Settings
    from worker.metrics import Metrics

log = structlog.get_logger("memfleet.notes")
_tracer = trace.get_tracer("memfleet.notes")

NOTES_PER_USER = 500  # the newest active notes a pass clusters of one user
CLUSTERS_PER_USER = 10  # promoted per user and pass; the rest wait for the next pass
NOTES_PER_REQUEST = 20  # the newest of a cluster's notes shown to the model


@dataclass(frozen=True, slots=True)
class PromotionPolicy:
    distance: float = 0.15
    sessions: int = 3
    users: int = 100
    memory_default: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> PromotionPolicy:
        return cls(settings.notes_promote_distance, settings.notes_promote_sessions,
                   settings.notes_promote_users, settings.memory_default)


@dataclass(slots=True)
class PassReport:
    ran: bool = True  # False: another process held the pass
    users: int = 0  # looked at
    clusters: int = 0  # found
    added: int = 0  # facts written
    covered: int = 0  # clusters an existing fact already said
    stale: int = 0  # clusters that changed before their transaction (another pass, ...)
    notes: int = 0  # notes promoted
    notes_covered: int = 0  # of them, into a fact the user had already
    fact_ids: list[int] = field(default_factory=list)


async def promotion_pass(
    store: NotePromotionStore, promoter: NotePromoter, embedder: Embedder,
    policy: PromotionPolicy, *, metrics: Metrics | None = None,
) -> PassReport:
    """One pass, if no other process runs one; what it did."""
    with _tracer.start_as_current_span("memfleet.notes.promotion") as span:
        async with store.claim_pass() as held:
            if not held:
                span.set_attribute("memfleet.notes.skipped", True)
                return PassReport(ran=False)
            report = PassReport()
            for user_id, newest in await store.users_to_check(
                    policy.sessions, policy.memory_default, policy.users):
                report.users += 1
                if await _promote_user(store, promoter, embedder, policy, user_id, report):
                    await store.mark_checked(user_id, newest)
        for name in ("users", "clusters", "added", "covered", "stale", "notes"):
            span.set_attribute(f"memfleet.notes.{name}", getattr(report, name))
    if metrics is not None:
        for result, count in (("added", report.notes - report.notes_covered),
                              ("covered", report.notes_covered)):
            if count:
                metrics.notes_promoted.add(count, {"result": result})
    if report.added or report.covered:
        log.info("notes promoted", users=report.users, facts=report.added,
                 covered=report.covered, notes=report.notes)
    return report


async def promote_users(
    store: NotePromotionStore, promoter: NotePromoter, embedder: Embedder,
    policy: PromotionPolicy, user_ids: Sequence[str],
) -> PassReport:
    """The promotion of these users alone (`memfleet eval`'s own users, never anyone
    else's): no pass lock and no record of where the job left them; each cluster's
    transaction guards it as in a pass."""
    report = PassReport()
    for user_id in user_ids:
        report.users += 1
        await _promote_user(store, promoter, embedder, policy, user_id, report)
    return report


async def _promote_user(
    store: NotePromotionStore, promoter: NotePromoter, embedder: Embedder,
    policy: PromotionPolicy, user_id: str, report: PassReport,
) -> bool:
    """Promote the user's recurring notes; False when a cluster is left for a later
    pass (an unusable answer), so the user is looked at again."""
    notes = await store.user_notes(user_id, embedder.model, embedder.dim, NOTES_PER_USER)
    found = clusters(notes, distance=policy.distance, sessions=policy.sessions,
                     limit=CLUSTERS_PER_USER)
    report.clusters += len(found)
    if not found:
        return True
    asked: list[tuple[Cluster, PromotedFact]] = []
    complete = True
    for cluster in found:
        try:
            answer = await promoter.promote(promotion_request(cluster))
        except ProviderAnswerInvalid as exc:
            log.warning("a notes' promotion answer was unusable", error=str(exc))
            complete = False
            continue
        asked.append((cluster, answer.value.fact))
    if not asked:
        return complete
    embedded = await embedder.embed([fact.text for _, fact in asked])
    nearest = await store.nearest_facts(user_id, embedded.value, embedder.model)
    for (cluster, fact), embedding, near in zip(asked, embedded.value, nearest, strict=True):
        covered_by = near[0] if near is not None and near[1] < policy.distance else None
        result = await store.promote(user_id, Promotion(
            note_ids=tuple(n.id for n in cluster.notes), text=fact.text,
            category=fact.category, importance=fact.importance, embedding=embedding,
            embedding_model=embedder.model, session_id=cluster.newest.session_id,
            observed_at=cluster.newest.observed_at, covered_by=covered_by),
            memory_default=policy.memory_default)
        if result is None:
            report.stale += 1
            continue
        report.notes += len(cluster.notes)
        report.fact_ids.append(result.fact_id)
        if result.added:
            report.added += 1
        else:
            report.covered += 1
            report.notes_covered += len(cluster.notes)
    return complete


def promotion_request(cluster: Cluster) -> NotePromotionRequest:
    """The cluster's newest notes, oldest first, each with its date."""
    shown = cluster.notes[-NOTES_PER_REQUEST:]
    return NotePromotionRequest(
        observed_at=cluster.newest.observed_at.date().isoformat(),
        notes=tuple(PromotionNote(text=n.text, observed_at=n.observed_at.date().isoformat())
                    for n in shown))
