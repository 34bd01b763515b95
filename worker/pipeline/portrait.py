"""One refresh of a user's portrait (docs/portrait.md): read what it would be made
from, decide whether a model call is needed, ask for it, write the new version.

No Redis here (worker.fleet.portrait_job queues and claims the refresh); no
transaction open across the model call (the store checks, when it writes, that the
portrait is still due: worker.store.portraits). The outcome names what happened, for
the metrics and the job's result; nothing of the user's text leaves this module but
to the model and the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from worker.pipeline.extract import observed_label
from worker.providers.base import PortraitWriter
from worker.providers.prompts import PORTRAIT_PROMPT_VERSION
from worker.providers.wire import MIN_PORTRAIT_WORDS, PortraitRequest, ProfileFact
from worker.store.portraits import PortraitFact, PortraitStore, facts_hash
from worker.store.types import ConsentGate
from worker.telemetry import StageClock

# written: a new version; unchanged: the facts are those of the current version (no
# model call); memory_off, not_wanted: no portrait is kept now (no model call);
# no_facts: no profile fact to make one from (the current version, if any, ends);
# fenced: the facts changed, the user was erased, removed the portrait or turned
# memory off while the model wrote, so nothing was written.
Refresh = Literal["written", "unchanged", "memory_off", "not_wanted", "no_facts", "fenced"]


@dataclass(frozen=True, slots=True)
class PortraitPolicy:
    """MEMFLEET_PORTRAIT_MAX_FACTS, _MAX_WORDS and MEMFLEET_MEMORY_DEFAULT."""

    max_facts: int = 60
    max_words: int = 120
    memory_default: bool = True


@dataclass(frozen=True, slots=True)
class Refreshed:
    outcome: Refresh
    version: int | None = None  # the version written
    fact_count: int = 0  # the facts it was made from


# What a portrait may say beyond its facts' own words: joins ("and", "where"), not claims.
PORTRAIT_SLACK_WORDS = 6


def words_for(facts: Sequence[PortraitFact], most: int) -> int:
    """The portrait's word budget: MEMFLEET_PORTRAIT_MAX_WORDS, but never more than its
    facts' own words and a few joins (a small model fills whatever room it is given),
    nor fewer than the wire's minimum."""
    said = sum(len(f.text.split()) for f in facts) + PORTRAIT_SLACK_WORDS
    return max(MIN_PORTRAIT_WORDS, min(most, said))


async def refresh_portrait(
    store: PortraitStore, writer: PortraitWriter, user_id: str, policy: PortraitPolicy, *,
    now: datetime, clock: StageClock,
) -> Refreshed:
    """Make the user's portrait current: at most one model call, none when the facts are
    those of the current portrait."""
    gate = ConsentGate(policy.memory_default)
    state = await store.portrait_state(user_id, gate)
    if not state.memory_on:
        return Refreshed("memory_off")  # the switch ended the portrait already
    if not state.wanted:
        return Refreshed("not_wanted")
    facts = await store.portrait_facts(user_id, policy.max_facts, gate)
    if not facts:
        if state.current is not None:
            await store.end_portrait(user_id, "no_facts")
        return Refreshed("no_facts")
    if facts_hash(facts) == state.facts_hash:
        return Refreshed("unchanged", state.current, len(facts))
    request = PortraitRequest(
        observed_at=observed_label(now), max_words=words_for(facts, policy.max_words),
        facts=tuple(ProfileFact.model_validate({"text": f.text, "category": f.category})
                    for f in facts))
    with clock.provider_call("portrait", writer.provider_name, writer.model) as done:
        answer = await writer.portrait(request)
        done(answer.model, answer.usage.input_tokens, answer.usage.output_tokens)
    written = await store.write_portrait(
        user_id, facts, text=answer.value.portrait, model=answer.model,
        prompt_version=PORTRAIT_PROMPT_VERSION, limit=policy.max_facts, gate=gate)
    if written is None:
        return Refreshed("fenced", None, len(facts))
    return Refreshed("written", written.version, len(facts))
