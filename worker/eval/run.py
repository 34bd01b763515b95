"""`memfleet eval`'s run: every scenario through the real pipeline, its end state read back.

Each scenario's turns are handed over as a chat server would (the payload through
``enqueue.lua``, with the scenario's moment as the hand-over's time), and a burst worker
commits them with the configured providers into PostgreSQL, as `memfleet demo` does.
Scenarios run side by side in rounds: round i hands over every scenario's i-th step,
then one worker drains the queue, so a suite costs as many worker starts as its
longest scenario has steps.

What it touches, and leaves as it found it: a queue of its own
(``memfleet:eval:<run>``), so no worker of the fleet takes its jobs and its worker
takes no one else's; users of its own (``eval-<run>-<scenario>``), erased at the end
by the real erase, with the queue's keys. The worker runs no expiry pass (it would
act on every user's facts, by the real clock). ``add_only`` turns every
consolidation decision into ADD (the ADD-only memory of mem0's library since 2026): a
control that shows what the suite's updates and retractions cost a memory that never
supersedes.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis

from worker.config import Settings, secret
from worker.conversation import Handover
from worker.eval.notes import promote_notes
from worker.eval.qa import QaChoice, ask_questions
from worker.eval.qa_score import QuestionScore
from worker.eval.score import People, ScenarioScore, active_at, score_scenario
from worker.eval.suite import Scenario, cycles_after, shifted
from worker.fleet.app import worker_options
from worker.memory_rules import Limits
from worker.ops.privacy import erase_user
from worker.protocol import keys, queue
from worker.protocol.arq_worker import Worker
from worker.protocol.keys import SessionRef
from worker.protocol.payload import check_id, fit_handover, parse_messages
from worker.providers.base import Answer, Consolidator, Embedder, Providers
from worker.providers.factory import build_embedder, embedding_model
from worker.providers.wire import ConsolidationAnswer, ConsolidationRequest, Decision
from worker.read import known_facts
from worker.store.fence_key import fence_keys
from worker.store.postgres import PostgresStore
from worker.store.types import ConsentGate, FactRecord
from worker.telemetry import hide_job_arguments, setup_telemetry

TURN_GAP = timedelta(minutes=1)  # between two user turns of a session


@dataclass(frozen=True, slots=True)
class HandOver:
    """One hand-over of a step: a session's whole list so far, at a moment."""

    session_id: str
    agent_id: str | None
    at: datetime
    messages: tuple[dict[str, str], ...]


Step = tuple[HandOver, ...]  # hand-overs, then a worker commits them


def plan_steps(scenario: Scenario) -> list[Step]:
    """The scenario's hand-overs, grouped by the commit that follows them: one hand-over
    after each user turn (a chat server's rhythm); a commit after each session, or after
    each user turn of a session that says ``commit_each_turn``."""
    steps: list[Step] = []
    for session in scenario.sessions:
        history: list[dict[str, str]] = []
        pending: list[HandOver] = []
        user_turns = 0
        for turn in session.turns:
            history.append({"role": turn.role, "content": turn.content})
            if turn.role != "user":
                continue
            pending.append(HandOver(session.id, session.agent,
                                    session.at + user_turns * TURN_GAP, tuple(history)))
            user_turns += 1
            if session.commit_each_turn:
                steps.append(tuple(pending))
                pending = []
        if pending:
            steps.append(tuple(pending))
    return steps


@dataclass(frozen=True, slots=True)
class SuiteRun:
    scores: list[ScenarioScore]
    outcomes: dict[str, int]  # the runs' outcomes (memory_run), over every scenario
    shift_years: int  # how far the scenario clock was moved (worker.eval.suite)
    answers: list[QuestionScore] = dataclasses.field(default_factory=list)  # --qa, --retrieval


class AddOnlyConsolidator:
    """A consolidator whose every decision is ADD: nothing is ever superseded."""

    def __init__(self, inner: Consolidator) -> None:
        self._inner = inner
        self.provider_name, self.model = inner.provider_name, inner.model

    async def consolidate(self, request: ConsolidationRequest) -> Answer[ConsolidationAnswer]:
        answer = await self._inner.consolidate(request)
        decisions = tuple(Decision(candidate=c.candidate, event="ADD")
                          for c in request.candidates)
        return Answer(ConsolidationAnswer(decisions=decisions), answer.usage, answer.model)

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


def _worker(settings: Settings, telemetry: Any, add_only: bool) -> Worker:
    options = worker_options(settings, burst=True, telemetry=telemetry)
    started = options["on_startup"]

    async def on_startup(ctx: dict[str, Any]) -> None:
        await started(ctx)
        if add_only:
            deps = ctx["deps"]
            providers: Providers = deps.providers
            wrapped = dataclasses.replace(
                providers, consolidator=AddOnlyConsolidator(providers.consolidator))
            ctx["deps"] = dataclasses.replace(deps, providers=wrapped)

    hide_job_arguments()
    return Worker(**{**options, "on_startup": on_startup, "poll_delay": 0})


async def _drain(settings: Settings, telemetry: Any, add_only: bool) -> None:
    worker = _worker(settings, telemetry, add_only)
    try:
        await worker.main()
    finally:
        await worker.close()


async def _hand_over(redis: Redis, settings: Settings, limits: Limits, user_id: str,
                     step: HandOver) -> None:
    handover = Handover(
        session_id=check_id(step.session_id, "session_id", limits),
        user_id=check_id(user_id, "user_id", limits),
        messages=parse_messages(list(step.messages), limits),
        handed_over_at=step.at,
        agent_id=None if step.agent_id is None else check_id(step.agent_id, "agent_id", limits),
    )
    handover, payload = fit_handover(handover, limits)
    await queue.enqueue(redis, SessionRef(user_id, step.session_id), payload=payload,
                        queue_name=settings.queue_name, limits=limits)


async def read_back(settings: Settings, store: PostgresStore, embedder: Embedder,
                    scenario: Scenario, user_id: str) -> dict[str | None, list[FactRecord]]:
    """What the read path (worker.read.known_facts, as a chat server calls it: the
    scenario's last user message as the query, the fleet's top-k) returns at the end,
    for no agent and for each agent the scenario names. The read skips what expired by
    the real clock; the scenario's clock is ahead of it, so its end decides too."""
    query = next(t.content for t in reversed(scenario.sessions[-1].turns) if t.role == "user")
    agents = sorted({s.agent for s in scenario.sessions if s.agent})
    views: dict[str | None, list[FactRecord]] = {}
    for agent in (None, *agents):
        got = await known_facts(store, embedder, user_id, query=query,
                                top_k=settings.read_top_k, agent_id=agent,
                                memory_default=settings.memory_default)
        views[agent] = [f for f in got if active_at(f, scenario.ends_at)]
    return views


async def people_of(store: PostgresStore, user_id: str) -> People:
    """The user's persons at the end, with their names, and the facts about them."""
    names = {p.id: (p.display_name or "", p.relation or "", *p.aliases)
             for p in await store.persons(user_id)}
    return People(names, await store.person_facts(user_id))


async def run_suite(
    settings: Settings, scenarios: Sequence[Scenario], *, add_only: bool = False,
    progress: Callable[[str], None] = lambda _: None, now: datetime | None = None,
    questions: QaChoice | None = None,
) -> SuiteRun:
    """Run the scenarios and score their end states, and ask their questions when
    ``questions`` says so (worker.eval.qa); every trace of the run is erased at the end,
    however it ends."""
    run = secrets.token_hex(4)
    settings = settings.model_copy(update={"queue_name": keys.eval_queue(run),
                                           "expiry_interval_s": 0.0})
    # Portraits (docs/portrait.md) for the scenarios that check one, refreshed after
    # every commit; the other users want none, so theirs end without a model call.
    portraits = {s.id for s in scenarios if s.expect.portrait is not None}
    if portraits:
        settings = settings.model_copy(update={"portrait_enabled": True,
                                               "portrait_min_interval": 0.0})
    years = cycles_after(min(s.sessions[0].at for s in scenarios), now or datetime.now(UTC))
    moved = [shifted(s, years) for s in scenarios]
    users = {s.id: f"eval-{run}-{s.id}" for s in moved}
    plans = {s.id: plan_steps(s) for s in moved}
    limits = Limits.from_settings(settings)
    telemetry = setup_telemetry(settings, "memfleet-eval")
    redis = Redis.from_url(settings.redis_url or "")
    store = await PostgresStore.connect(
        settings.database_url or "",
        fences=fence_keys(secret(settings.erase_fence_key), settings.home_dir))
    try:
        if not settings.memory_default:  # the fleet's users start with memory off
            for user_id in users.values():
                await store.set_consent(user_id, True)
        if portraits:
            for scenario_id, user_id in users.items():
                if scenario_id not in portraits:
                    await store.remove_portrait(user_id)
        rounds = max(len(p) for p in plans.values())
        for index in range(rounds):
            progress(f"round {index + 1} of {rounds}")
            for scenario in moved:
                if index < len(plans[scenario.id]):
                    for step in plans[scenario.id][index]:
                        await _hand_over(redis, settings, limits, users[scenario.id], step)
            await _drain(settings, telemetry, add_only)
        if settings.notes_enabled:
            # The fleet's daily promotion job, once the conversations are over.
            progress("notes' promotion")
            await promote_notes(settings, list(users.values()))
        scores, outcomes = [], Counter[str]()
        embedder = build_embedder(settings, embedding_model(settings), settings.embed_dim)
        try:
            for scenario in moved:
                user_id = users[scenario.id]
                facts = await store.facts(user_id, include_superseded=True, scope="all")
                read = await read_back(settings, store, embedder, scenario, user_id)
                portrait = None if scenario.id not in portraits else \
                    await store.current_portrait(user_id, ConsentGate(settings.memory_default))
                scores.append(score_scenario(scenario, facts, read,
                                             await people_of(store, user_id),
                                             None if portrait is None else portrait.text))
                outcomes.update(str(r["outcome"]) for r in await store.runs(user_id))
        finally:
            close = getattr(embedder, "aclose", None)
            if close is not None:
                await close()
        answers = []
        if questions is not None and questions.any:
            answers = await ask_questions(settings, store, moved, users, questions, progress)
        return SuiteRun(scores, dict(outcomes), years, answers)
    finally:
        try:
            for user_id in users.values():
                await erase_user(redis, store, user_id, keep_opt_out=False,
                                 queue_name=settings.queue_name)
            await redis.delete(*keys.queue_keys(settings.queue_name))
        finally:
            await store.aclose()
            await redis.aclose()
            telemetry.shutdown()
