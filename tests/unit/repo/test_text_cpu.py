"""Every regex and parser over user or model text does linear, bounded work (issue 25).

Adversarial texts (whitespace runs, repeated fillers, nested brackets, astral
characters, unclosed reasoning tags, unbalanced braces, each up to the
hand-over's 32,000 characters or 56 KB of model answer) go through every
function of worker/ that matches a pattern or parses text a user or a model
wrote. Each text must cost well under a second of CPU; before the fix single
calls cost 20 s and more. The bound is coarse on purpose (a loaded CI must not
flake): the point is seconds against milliseconds. bench/text_cpu.py prints
the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.text_cpu import timing_the_loop
from worker import log_redaction, memory_rules, persons_rules, read_block, read_notes, read_search
from worker.errors import OfflineAnswerInvalid, ProviderAnswerInvalid, ProviderWorkOverBudget
from worker.eval import form, longmemeval, qa_rules, qa_score, qa_wire, score, suite
from worker.pipeline import extract, mentions, provenance
from worker.pipeline import notes as pipeline_notes
from worker.providers import (
    hashing,
    llm_json,
    rules,
    rules_notes,
    rules_patterns,
    rules_persons,
    rules_time,
)
from worker.providers.openai_chat import parse_completion
from worker.providers.openai_embed import parse_embeddings
from worker.providers.wire import (
    MAX_FACT_CHARS,
    MAX_NOTE_CHARS,
    Candidate,
    ConsolidationAnswer,
    ConsolidationRequest,
    ExtractedNote,
    ExtractionAnswer,
    ExtractionRequest,
    KnownPerson,
    Neighbor,
    SummaryAnswer,
    SummaryRequest,
    WireMessage,
)
from worker.store import imports
from worker.store.note_types import NoteRecord
from worker.store.types import FactRecord

LIMIT = 32_000  # the hand-over's per-message limit (memory_rules.DEFAULT_MAX_MESSAGE_CHARS)
CPU_BOUND_S = 1.5  # per text, all functions together: milliseconds now, seconds before
TODAY = date(2026, 11, 22)
NOW = datetime(2026, 11, 22, tzinfo=UTC)

# Modules of worker/ that compile patterns, and whether those patterns see text a
# user or a model wrote. A new module with a pattern fails the census below until
# it is sorted here (and, when it reads such text, exercised by this file).
OVER_USER_OR_MODEL_TEXT = {
    "worker/memory_rules.py", "worker/read_search.py", "worker/read_block.py",
    "worker/providers/hashing.py",
    "worker/providers/llm_json.py", "worker/providers/rules.py",
    "worker/providers/rules_patterns.py", "worker/providers/rules_time.py",
    "worker/pipeline/extract.py", "worker/store/imports.py", "worker/testing/in_memory_store.py",
    "worker/log_redaction.py",  # every log line, whatever an exception quoted
    "worker/eval/suite.py",  # `memfleet eval`'s gold words over a model's fact texts
    "worker/eval/longmemeval.py",  # a LongMemEval file's answers and dates
    "worker/eval/qa_score.py",  # `memfleet eval --qa`: a model's answer, its dates
    "worker/eval/qa_rules.py",  # the offline answers: a block of fact texts, a question
    "worker/eval/form.py",  # `memfleet eval`: is a model's fact text one claim?
    "worker/eval/score.py",  # `memfleet eval`: the dates a model's fact text names
    "worker/providers/rules_persons.py",  # the rules provider's clauses about persons
    "worker/persons_rules.py",  # a model's or a user's person name, relation, alias
    "worker/pipeline/mentions.py",  # a model's fact text, read for who it is about
    # notes beside facts (docs/notes.md): the rules' note, a model's notes, the search
    "worker/providers/rules_notes.py", "worker/pipeline/notes.py", "worker/read_notes.py",
    "worker/testing/in_memory_notes.py",
    # the extraction screen: a user's messages split, a candidate's text read
    "worker/pipeline/provenance.py",
}
OVER_OWN_TEXT = {  # settings names, SQL files, migration names, a server's own log,
    # an operator's webhook URL and event id
    "worker/embedded/postgres.py", "worker/embedded/redis.py", "worker/store/queries.py",
    "worker/store/migrate.py", "worker/fleet/webhook.py", "worker/fleet/webhook_start.py",
    "worker/store/service_keys.py",  # a bearer token or a key id (both fixed-length)
    "worker/api/settings.py",  # MEMFLEET_PANEL_FRAME_ANCESTORS, an operator's setting
    "worker/redis_shards.py",  # MEMFLEET_REDIS_SHARDS shard names, an operator's setting
    # a webhook signature header: at most 1,024 characters, fixed-length patterns
    "worker/protocol/webhook_signature.py",
    # argparse's own invalid-choice message, over a command line's word (no nesting)
    "worker/cli/typo.py",
    # the memory API's error detail, cut to 300 characters before it is matched
    "worker/client/memory_api_wire.py",
}
# The memory API's (worker/api, from api_stub/ where the census did not look): a
# request's path and a validation error's field names, which a client sends but
# uvicorn bounds (its request line), matched by anchored patterns without nested
# repetition (one pass each).
OVER_REQUESTS = {
    "worker/api/errors.py", "worker/api/guards.py", "worker/api/handover_fast.py",
}


def _fit(text: str, limit: int = LIMIT) -> str:
    return text[:limit]


RAW: dict[str, str] = {
    "spaces": "I use" + " " * LIMIT + "x",
    "tabs and newlines": "I live in" + " \t\n" * LIMIT,
    "fillers": "I use Postgres" + " now" * LIMIT,
    "mixed fillers": "I like tea" + " really lately these days" * LIMIT,
    "long word": "my " + "a" * LIMIT + " is great",
    "long value": "my name is " + "Ana " * LIMIT,
    "switched": "I switched from " * LIMIT,
    "don't use": "I don't use x" + " " * LIMIT + " y",
    "by profession": "I'm an " + "engineer " * LIMIT,
    "going to": "I'm going to " + "Rome " * LIMIT,
    "my my": "my " * LIMIT,
    "i i": "i " * LIMIT,
    "commas": "I use x," * LIMIT,
    "ands": "I use x and " * LIMIT,
    "emoji": "I like \U0001f600\U0001f3f3\ufe0f\u200d\U0001f308 " * LIMIT,
    "astral only": "\U0001d54f" * LIMIT,
    "nested brackets": "[({" * LIMIT,
    "unbalanced braces": '{"facts": [{"text": "' + "{" * LIMIT,
    "braces with strings": '{"a' * LIMIT,
    "think unclosed": "<think>" * LIMIT,
    "think attributes": "<think " * LIMIT,
    "close tags": "</think " * LIMIT,
    "long think": "<think>" + "hmm " * 14_000 + "</think>" + '{"facts": []}',
    "quotes": "\u2019'\"`" * LIMIT,
    "sentence ends": ". ! ? ; " * LIMIT,
    "ago": "I moved to Oslo " + "3 weeks ago " * LIMIT,
    "since": "since 2020 " * LIMIT,
    "call me": "you can call me " * LIMIT,
    "forget": "please forget that " * LIMIT,
    "control characters": "\x01\x85\u2028 " * LIMIT,
    "digits": "1,000 " * LIMIT,
    # The wider reading of issue 40: names, jobs, diets, negations, moves.
    "name words": "I'm " + "Grace " * LIMIT,
    "job words": "I'm a " + "senior " * LIMIT + "nurse",
    "not not": "I'm " + "not " * LIMIT + "vegan",
    "moved from": "I moved from " * LIMIT,
    "don't eat": "I don't eat " + "meat " * LIMIT,
    "work with at": "I work with x" + " at x" * LIMIT,
    "any more": "I'm not vegan" + " any more" * LIMIT,
}
ADVERSARIAL = {name: _fit(text) for name, text in RAW.items()}
# Model answers as long as the parser reads (llm_json.MAX_ANSWER_CHARS), nearly.
ANSWER_LIMIT = 200_000
ANSWERS = {**{name: _fit(text * 8, ANSWER_LIMIT) for name, text in RAW.items()},
           "deep list": "[" * ANSWER_LIMIT, "deep object": '{"a":' * (ANSWER_LIMIT // 5)}


def _extraction(text: str, agent: str | None = None,
                with_notes: bool = False) -> ExtractionRequest:
    return ExtractionRequest(observed_at="2026-11-22 (Sunday)", summary=None,
                             context=(), messages=(WireMessage(role="user", content=text),),
                             agent=agent, with_notes=with_notes)


def _quietly(call: Callable[[], Any]) -> None:
    """A call that may refuse the text, but only with memfleet's own error."""
    with contextlib.suppress(ProviderAnswerInvalid):
        call()


def _clause_form(text: str) -> str:
    """What the rules' patterns are given: a normalised clause, capped."""
    return rules.capped(rules.normalised(text))


def _every_parse(text: str) -> None:
    """Every function of worker/ that matches a pattern or parses user or model text."""
    # The rules provider, end to end, and its parts on their own input forms.
    facts = rules.extract_facts(_extraction(text)).facts
    facts += rules.extract_facts(_extraction(text, agent="a1")).facts
    facts += rules.extract_facts(_extraction(text).model_copy(update={"people": (
        KnownPerson(name="Ana", relation="sister", aliases=("Annie",)),)})).facts
    assert all(len(f.text) <= MAX_FACT_CHARS for f in facts)
    # Notes (docs/notes.md): the rules' note of a sentence, and what the pipeline and a
    # prompt's section make of a model's notes.
    with_notes = rules.extract_facts(_extraction(text, with_notes=True))
    rules_notes.note_in(text)
    rules_notes.note_in("I'm thinking about " + text)
    pipeline_notes.states_a_consideration(text)
    # The extraction screen (docs/memory_model.md, "What is never kept").
    provenance.states_a_secret(text)
    provenance.states_a_secret("The user's password is " + text)
    pasted_names = provenance.pasted_only([text, "---\n" + text, "> " + text,
                                           "assistant: " + text])
    provenance.from_pasted(text, pasted_names | {"oslo"})
    quoted_words = provenance.quoted_only([text, "Tom said '" + text + "' and " + text,
                                           'She told me "' + text])
    provenance.from_quoted("The user " + text, quoted_words | {"alle"})
    pipeline_notes.states_a_consideration("The user is still " + text)
    pipeline_notes.notes_from(ExtractionAnswer(
        facts=(), notes=(ExtractedNote(text=text[:MAX_NOTE_CHARS]), *with_notes.notes)))
    fact_text = text[:MAX_FACT_CHARS]
    rules.decide(ConsolidationRequest(observed_at="2026-11-22", candidates=(Candidate(
        candidate=0, text=fact_text, category="fact",
        neighbors=(Neighbor(id=1, text=text, observed_at="2026-01-01"),)),)))
    rules.summarize(SummaryRequest(observed_at="2026-11-22", previous_summary=text,
                                   messages=(WireMessage(role="user", content=text),)))
    rules_patterns.parse_fact(text)
    rules_patterns.norm(text)
    rules_patterns.clean_text(text)
    rules_patterns.clean_value(text)
    clause = _clause_form(text)
    for rule in rules_patterns.RULES:
        match = rule.pattern.search(clause)
        if match is not None:
            rule.render(match)
    rules_time.valid_from_in(text, TODAY)
    rules_time.temporary_in(clause, TODAY)
    rules_time.relationship_in(clause)
    rules_persons.person_clause(clause, (KnownPerson(name="Ana", relation=None),), None, 0)
    persons_rules.key(text)
    persons_rules.relation_key(text)
    mentions.implied_mention(text)
    mentions.mention_in(text, text, text)
    mentions.mention_in("The user's sister " + text, "Ana", None)
    mentions.mention_in("Ana goes by " + text, "Ana", None)  # a rename's reading
    mentions.restated("The user " + text, "Ana", [text, "Ana " + text])
    mentions.said_relation(mentions.Mention("Ana", None), [text, "Ana is my " + text])
    with contextlib.suppress(ValueError):
        persons_rules.clean_label(text, persons_rules.MAX_PERSON_NAME_CHARS)
    # Model answers: the tolerant parser and the bodies around it.
    _quietly(lambda: llm_json.parse_answer(text, ExtractionAnswer))
    _quietly(lambda: llm_json.parse_answer(text, ConsolidationAnswer))
    _quietly(lambda: llm_json.parse_answer(text, SummaryAnswer))
    list(llm_json.json_candidates(text))
    llm_json.strip_reasoning(text)
    body = json.dumps({"choices": [{"message": {"content": text}}]}).encode()
    _quietly(lambda: parse_completion(body))
    _quietly(lambda: parse_completion(text.encode("utf-8", "surrogatepass")))
    _quietly(lambda: parse_embeddings(text.encode("utf-8", "surrogatepass")))
    # The pipeline's and the store's own readings of the same texts.
    extract.parse_moment(text)
    extract.candidates_from(ExtractionAnswer(facts=facts))
    memory_rules.text_fault(text)
    memory_rules.id_fault(text, LIMIT)
    hashing.hash_embed(text, 64)
    read_search.words_query(text)
    read_block.format_block([FactRecord(1, "u", text, "fact", 5, NOW, None, "extracted", None,
                                        None, NOW)])
    read_notes.format_notes([NoteRecord(1, "u", text, NOW, None, NOW)])
    # `memfleet eval`'s gold words (literal alternatives) over a model's fact text.
    suite.Absent(words=("Lisbon|Lisboa", "allerg*"), unless=("moved",)).false_in(text)
    form.fault(text)
    form.well_formed(text)
    score.text_dates(text)
    longmemeval.distinctive_words(text)
    for date_text in (text, "2023/05/20 (Sat)" + text):
        with contextlib.suppress(ValueError):  # not a date: the loader names the field
            longmemeval.parse_date(date_text)
    # `memfleet eval --qa`: a model's answer scored, a block of fact texts answered from.
    asked = suite.Question(ask="When did the user move to Cork?", answer="2054-03-17",
                           match="date", wrong=("Porto",), fact={"words": ["Cork"]})
    qa_score.exact_match(asked, text)
    qa_score.exact_match(asked.model_copy(update={"match": "words"}), text)
    qa_score.dates_in("17 " + text + " March 2054 " + text)
    block = "\n".join("- [fact] " + line + " (2054-03-18)" for line in text.splitlines())
    qa_rules.answer_question(qa_wire.AnswerRequest(question=text[:2000], known_facts=block))
    qa_rules.answer_question(qa_wire.AnswerRequest(question="When " + text[:200],
                                                   known_facts="- " + text))
    qa_rules.judge_answer(qa_wire.JudgeRequest(question="?", reference=text[:500], answer=text))
    imports.normalised(text)
    {w.lower() for w in re.findall(r"\w+", text)}  # worker.testing.in_memory_store's word match
    log_redaction.redact_urls_in(text)
    log_redaction.redact_urls_in("see http://u:p@h/" + text)


def _cpu_s(call: Callable[[], None]) -> float:
    started = time.process_time()
    call()
    return time.process_time() - started


def test_every_module_with_a_pattern_is_sorted() -> None:
    root = Path(__file__).resolve().parents[3]
    compiling = {str(p.relative_to(root)) for p in (root / "worker").rglob("*.py")
                 if "re.compile(" in p.read_text()}
    assert compiling == OVER_USER_OR_MODEL_TEXT | OVER_OWN_TEXT | OVER_REQUESTS


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_an_adversarial_message_costs_milliseconds(name: str) -> None:
    spent = _cpu_s(lambda: _every_parse(ADVERSARIAL[name]))
    assert spent < CPU_BOUND_S, f"{name}: {spent:.2f} s of CPU"


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_an_adversarial_answer_costs_milliseconds(name: str) -> None:
    text = ANSWERS[name]
    spent = _cpu_s(lambda: _quietly(lambda: llm_json.parse_answer(text, ExtractionAnswer)))
    assert spent < CPU_BOUND_S, f"{name}: {spent:.2f} s of CPU"


PIECES = [" ", "  ", "\n", "\t", " now", " too", " and ", ",", ";", ". ", "I ", "i ", "my ",
          "use ", "don't ", "switched from ", " to ", "any more", " is ", "called ", "{", "}",
          "[", "]", '"', "\\", "<think>", "</think>", "<reasoning ", "\U0001f600", "\u2019",
          "a", "Oslo", "1", "ago "]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.tuples(st.sampled_from(PIECES), st.integers(1, 4_000)), min_size=1,
                max_size=6))
def test_runs_of_any_pieces_cost_milliseconds(runs: list[tuple[str, int]]) -> None:
    text = _fit("".join(piece * count for piece, count in runs))
    spent = _cpu_s(lambda: _every_parse(text))
    assert spent < CPU_BOUND_S, f"{spent:.2f} s of CPU for {[(p, n) for p, n in runs]}"


# ---------------------------------------------------------------- what stayed the same

_OLD_REASONING = re.compile(
    r"<(think|thinking|reasoning)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["<think>", "</think>", "</think >", "<thinking a=1>",
                                 "</thinking>", "<Reasoning>", "</reasoning>", "</THINK>",
                                 "x", " ", "{", "<think", ">"]), max_size=14))
def test_reasoning_blocks_are_stripped_as_the_lazy_pattern_did(parts: list[str]) -> None:
    text = "".join(parts)
    assert llm_json.strip_reasoning(text) == _OLD_REASONING.sub("", text)


def test_an_answer_above_the_limit_is_refused_unread() -> None:
    huge = json.dumps({"facts": [{"text": "x" * llm_json.MAX_ANSWER_CHARS, "category": "fact",
                                  "importance": 5}]})
    with pytest.raises(ProviderAnswerInvalid, match="characters long"):
        llm_json.parse_answer(huge, ExtractionAnswer)


def test_the_long_fact_is_kept_within_the_wire_limit() -> None:
    # "my <thing> is ..." had no bound: the fact broke the wire's 1,000 characters and
    # a pydantic error (quoting the text) escaped the job.
    said = "my " + " ".join(["favourite"] * 3 + ["c" * 2_000]) + " is Lisbon"
    for fact in rules.extract_facts(_extraction(said)).facts:
        assert len(fact.text) <= MAX_FACT_CHARS
    assert rules.extract_facts(_extraction("my " + "a" * 3_000 + " is great")).facts == ()


# ---------------------------------------------------------------- off the loop, on a budget

# A third of the costliest slice the limits allow: 20 messages of 32,000 characters
# of short statements, over a second of CPU even now (linear, but not free).
BIG_SLICE = tuple(
    WireMessage(role="user", content=_fit("I live in Lisbon. I use Postgres now. My name is "
                                          f"Ana{i}. " * 600)) for i in range(20))


def test_a_rules_call_over_its_cpu_budget_is_refused() -> None:
    extractor = rules.RulesExtractor(cpu_budget_s=0.01)
    request = ExtractionRequest(observed_at="2026-11-22 (Sunday)", summary=None, context=(),
                                messages=BIG_SLICE)
    with pytest.raises(ProviderWorkOverBudget, match="MEMFLEET_PROVIDER_CPU_BUDGET_S"):
        asyncio.run(extractor.extract(request))


def test_a_rules_answer_that_breaks_the_wire_is_our_error_without_the_text() -> None:
    marker = "Zq7secretmarker"

    def broken(checkpoint: Callable[[], None]) -> ExtractionAnswer:
        return ExtractionAnswer.model_validate({"facts": [{"text": marker * 100,
                                                           "category": "fact", "importance": 5}]})

    with pytest.raises(OfflineAnswerInvalid) as raised:
        asyncio.run(rules._answered(broken, 5.0)())
    assert marker not in str(raised.value) and raised.value.__suppress_context__
    assert "facts.0.text: string_too_long" in str(raised.value)


def test_the_event_loop_keeps_turning_while_the_rules_work() -> None:
    # Seconds of CPU on a slice of long messages: the loop must keep serving other jobs.
    request = ExtractionRequest(observed_at="2026-11-22 (Sunday)", summary=None, context=(),
                                messages=BIG_SLICE)
    extractor = rules.RulesExtractor(cpu_budget_s=60.0)

    async def scenario() -> float:
        answer, longest = await timing_the_loop(extractor.extract(request), tick_s=0.005)
        assert answer.value.facts
        return longest

    longest = asyncio.run(scenario())
    assert longest < 1.0, f"the loop stood still for {longest:.2f} s"


def test_a_workers_rules_providers_run_on_their_own_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Not the loop's default executor: it also resolves host names for new
    # connections, which must not queue behind pattern matching.
    from worker.config import Settings
    from worker.providers.factory import build_providers

    seen: list[str] = []
    real = rules.extract_facts

    def recording(request: ExtractionRequest, checkpoint: Callable[[], None]) -> Any:
        seen.append(threading.current_thread().name)
        return real(request, checkpoint)

    monkeypatch.setattr(rules, "extract_facts", recording)
    providers = build_providers(Settings(provider_cpu_budget_s=3.0))

    async def scenario() -> None:
        try:
            answer = await providers.extractor.extract(_extraction("I live in Oslo."))
            assert [f.text for f in answer.value.facts] == ["Lives in Oslo"]
        finally:
            await providers.aclose()

    asyncio.run(scenario())
    assert len(seen) == 1 and seen[0].startswith("memfleet-cpu"), seen


def test_a_completion_body_above_its_cap_is_refused_unread() -> None:
    from worker.providers.openai_chat import MAX_COMPLETION_BYTES

    body = json.dumps({"choices": [{"message": {"content": "x" * MAX_COMPLETION_BYTES}}]})
    with pytest.raises(ProviderAnswerInvalid, match="bytes, above"):
        parse_completion(body.encode())
