"""The offline rules provider: pattern extraction, slot-aware consolidation, summaries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.providers.base import Consolidator, Extractor, Summarizer, Usage
from worker.providers.rules import (
    RulesConsolidator,
    RulesExtractor,
    RulesSummarizer,
    decide,
    extract_facts,
    summarize,
)
from worker.providers.rules_patterns import Slot, parse_fact
from worker.providers.wire import (
    Candidate,
    Category,
    ConsolidationRequest,
    Decision,
    ExtractionRequest,
    Neighbor,
    SummaryRequest,
    WireMessage,
)

# ---------------------------------------------------------------- helpers


def _extraction(*user: str, assistant: tuple[str, ...] = (),
                context: tuple[str, ...] = ()) -> ExtractionRequest:
    messages = [WireMessage(role="user", content=text) for text in user]
    messages += [WireMessage(role="assistant", content=text) for text in assistant]
    return ExtractionRequest(
        observed_at="2026-11-22 (Sunday)",
        summary=None,
        context=tuple(WireMessage(role="user", content=text) for text in context),
        messages=tuple(messages),
    )


def _texts(*user: str) -> list[str]:
    return [fact.text for fact in extract_facts(_extraction(*user)).facts]


def _n(id_: int, text: str, observed_at: str = "2026-01-01") -> Neighbor:
    return Neighbor(id=id_, text=text, observed_at=observed_at)


def _decide(text: str, *neighbors: Neighbor, category: Category = "fact") -> Decision:
    request = ConsolidationRequest(
        observed_at="2026-11-22 (Sunday)",
        candidates=(Candidate(candidate=0, text=text, category=category,
                              neighbors=tuple(neighbors)),),
    )
    (decision,) = decide(request).decisions
    assert decision.candidate == 0
    return decision


# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("said", "fact", "category", "importance"),
    [
        ("My name is Ada Lovelace.", "Name is Ada Lovelace", "fact", 9),
        ("I'm called Zoë", "Name is Zoë", "fact", 9),
        ("Just call me Max!", "Name is Max", "fact", 9),
        ("I live in Berlin.", "Lives in Berlin", "fact", 8),
        ("I'm based in São Paulo", "Lives in São Paulo", "fact", 8),
        ("I just moved to Paris a few months ago", "Lives in Paris", "fact", 8),
        ("I relocated to Lisbon", "Lives in Lisbon", "fact", 8),
        ("I work at Acme Corp.", "Works at Acme Corp", "fact", 7),
        ("I work for the city council", "Works at the city council", "fact", 7),
        ("I work as a data engineer", "Works as data engineer", "fact", 7),
        ("I'm a nurse by profession", "Works as nurse", "fact", 7),
        ("I use Postgres", "Uses Postgres", "preference", 6),
        ("We use Python 3.11 now.", "Uses Python 3.11", "preference", 6),
        ("I'm using Node.js", "Uses Node.js", "preference", 6),
        ("we're using Kubernetes", "Uses Kubernetes", "preference", 6),
        ("We switched from MySQL to Postgres", "Uses Postgres instead of MySQL", "decision", 7),
        ("I moved from Vim to Helix", "Moved from Vim to Helix", "fact", 7),
        ("we've migrated from Heroku to Fly.io", "Uses Fly.io instead of Heroku", "decision", 7),
        ("I switched to Rust", "Uses Rust", "decision", 6),
        ("We migrated over to GitLab", "Uses GitLab", "decision", 6),
        ("I no longer use Slack", "No longer uses Slack", "decision", 6),
        ("I stopped using Emacs", "No longer uses Emacs", "decision", 6),
        ("I don't use Jira anymore", "No longer uses Jira", "decision", 6),
        ("we dropped Terraform", "No longer uses Terraform", "decision", 6),
        ("I prefer dark mode", "Prefers dark mode", "preference", 6),
        ("I like jazz", "Likes jazz", "preference", 5),
        ("I really love hiking in the Alps", "Likes hiking in the Alps", "preference", 5),
        ("I enjoy chess", "Likes chess", "preference", 5),
        ("I don't like cilantro", "Dislikes cilantro", "preference", 5),
        ("I hate Mondays", "Dislikes Mondays", "preference", 5),
        ("I dislike meetings", "Dislikes meetings", "preference", 5),
        ("I'm allergic to peanuts", "Is allergic to peanuts", "fact", 9),
        ("I am learning Japanese", "Is learning Japanese", "fact", 5),
        ("My wife's name is Anna", "Wife's name is Anna", "relationship", 7),
        ("my dog is called Rex", "Dog's name is Rex", "relationship", 7),
        ("My sister is named Jo", "Sister's name is Jo", "relationship", 7),
        ("My boss is Dana", "Boss's name is Dana", "relationship", 7),
        ("My favorite color is blue", "Favorite color is blue", "fact", 5),
        ("my timezone is CET", "Timezone is CET", "fact", 5),
    ],
)
def test_each_pattern(said: str, fact: str, category: str, importance: int) -> None:
    (extracted,) = extract_facts(_extraction(said)).facts
    assert (extracted.text, extracted.category, extracted.importance) == (
        fact, category, importance
    )


def test_several_facts_in_one_message_split_at_and_and_commas() -> None:
    assert _texts("Hi! My name is Bob and I live in Berlin, I work at Acme but I hate Java.") == [
        "Name is Bob", "Lives in Berlin", "Works at Acme", "Dislikes Java",
    ]


def test_curly_apostrophes_count_as_straight_ones() -> None:
    assert _texts("I\u2019m allergic to shellfish", "I don\u2019t like olives") == [
        "Is allergic to shellfish", "Dislikes olives",
    ]


@pytest.mark.parametrize(
    "said",
    [
        "Hi!", "Hello there", "thanks", "ok", "Thanks a lot, that helps.",
        "Do you think I should use Postgres?",
        "What do I use for caching?",
        "Can you tell me where I live in this story",
        "If I use Redis, will it scale",
        "I like it", "I love that!",
        "My boss is nice", "my wife is a doctor",
        "Call me later", "call me when you are done",
        "My question is simple",
        "I'd like to order a pizza", "I want to use Rust", "I used Perl once",
    ],
)
def test_questions_greetings_and_non_facts_yield_nothing(said: str) -> None:
    assert _texts(said) == []


def test_only_the_statements_of_a_mixed_message_count() -> None:
    assert _texts("Should I use Go? I use Python. Is that bad?") == ["Uses Python"]


def test_assistant_turns_and_context_are_ignored() -> None:
    request = _extraction(
        "thanks!",
        assistant=("I live in the cloud and I use GPUs.",),
        context=("I live in Oslo",),
    )
    assert extract_facts(request).facts == ()


def test_identical_facts_are_reported_once() -> None:
    assert _texts("I use Postgres.", "I use postgres! We use Postgres") == ["Uses Postgres"]


def test_values_keep_casing_and_are_capped() -> None:
    (text,) = _texts("I use " + "very long tool name " * 20)
    value = text.removeprefix("Uses ")
    assert len(value) <= 80
    assert value.startswith("very long tool name")
    (unbroken,) = _texts("I use " + "x" * 500)
    assert unbroken == "Uses " + "x" * 80
    assert _texts("I use PostgreSQL and DuckDB") == ["Uses PostgreSQL"]


@pytest.mark.parametrize(
    "said",
    [
        "我住在北京。我喜欢喝茶",
        "Ich wohne in Berlin und ich mag Kaffee.",
        "\u200b\u200b\u200b",
        "I use \U0001F680 and I like \u00e9t\u00e9",
        "my " + "a " * 5000 + "is x",
        "I " * 3000,
        "....!!!???;;;,,,",
        "\n\n\n",
        "I'm",
        "my name is",
    ],
)
def test_odd_input_does_not_crash(said: str) -> None:
    for fact in extract_facts(_extraction(said)).facts:
        assert 1 <= len(fact.text) <= 1000


_PHRASES = st.sampled_from([
    "I use ", "my name is ", "I'm ", "we switched from ", " to ", " and ", ", ", "? ", ". ",
    "my wife is ", "call me ", "I don't use ", " anymore", "I like ", "Ünïcödé ", "\u2019",
    "", " ", "\n", "x", "3.11", "!",
])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.one_of(_PHRASES, st.text(max_size=20)), max_size=25))
def test_any_message_yields_valid_distinct_facts(pieces: list[str]) -> None:
    facts = extract_facts(_extraction("".join(pieces))).facts
    texts = [fact.text.casefold() for fact in facts]
    assert len(texts) == len(set(texts))
    for fact in facts:
        assert fact.text == fact.text.strip()
        assert 1 <= fact.importance <= 10


def test_unicode_values_come_through() -> None:
    assert _texts("I live in Zürich", "I like 日本茶") == ["Lives in Zürich", "Likes 日本茶"]


# ---------------------------------------------------------------- reading facts back


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("Lives in Berlin", Slot("single", "lives in", "Berlin")),
        ("User lives in Berlin.", Slot("single", "lives in", "Berlin")),
        ("Works as a nurse", Slot("single", "works as", "nurse")),
        ("Name is Bob", Slot("single", "thing:name", "Bob")),
        ("The user's name is Bob", Slot("single", "thing:name", "Bob")),
        ("Wife's name is Anna", Slot("single", "relation:wife", "Anna")),
        ("Has a dog named Rex", Slot("single", "relation:dog", "Rex")),
        ("Favorite color is blue", Slot("single", "thing:favorite color", "blue")),
        ("Uses SQLite instead of Postgres", Slot("switch", "", "SQLite", "Postgres")),
        ("No longer uses Vim", Slot("stopped", "", "Vim")),
        ("Uses Vim", Slot("uses", "", "Vim")),
        ("Likes jazz", Slot("likes", "", "jazz")),
        ("Dislikes jazz", Slot("dislikes", "", "jazz")),
    ],
)
def test_parse_fact(text: str, slot: Slot) -> None:
    assert parse_fact(text) == slot


@pytest.mark.parametrize("text", ["Prefers tea", "Is allergic to nuts", "Went to a concert"])
def test_many_valued_or_unknown_facts_have_no_slot(text: str) -> None:
    assert parse_fact(text).kind == "other"


def test_every_extracted_fact_parses_back_to_a_known_shape() -> None:
    facts = _texts(
        "My name is Bob. I live in Oslo. I work at Acme. I work as a chef. I use Vim. "
        "We switched from Vim to Helix. I stopped using Emacs. I like tea. I hate rain. "
        "My cat is called Tom. My timezone is CET."
    )
    assert len(facts) == 11
    assert all(parse_fact(text).kind != "other" for text in facts)


# ---------------------------------------------------------------- consolidation


def test_switch_updates_the_old_tool() -> None:
    assert _decide("Uses SQLite instead of Postgres", _n(3, "Uses Postgres")) == Decision(
        candidate=0, event="UPDATE", target=3, text="Uses SQLite"
    )


def test_switch_updates_an_earlier_switch_to_the_old_tool() -> None:
    decision = _decide("Uses SQLite instead of Postgres", _n(4, "Uses Postgres instead of MySQL"))
    assert (decision.event, decision.target, decision.text) == ("UPDATE", 4, "Uses SQLite")


def test_switch_matches_tools_case_insensitively() -> None:
    decision = _decide("Uses SQLite instead of postgres", _n(1, "Lives in Oslo"),
                       _n(2, "uses Postgres."))
    assert (decision.event, decision.target) == ("UPDATE", 2)


def test_switch_to_a_tool_already_in_use_changes_nothing() -> None:
    decision = _decide("Uses SQLite instead of Postgres", _n(5, "Uses SQLite"))
    assert (decision.event, decision.target) == ("NONE", 5)


def test_switch_with_both_tools_recorded_retires_the_old_one() -> None:
    decision = _decide("Uses SQLite instead of Postgres", _n(5, "Uses SQLite"),
                       _n(6, "Uses Postgres"))
    assert (decision.event, decision.target) == ("DELETE", 6)


def test_switch_with_nothing_to_replace_adds_the_new_tool() -> None:
    assert _decide("Uses SQLite instead of Postgres", _n(1, "Likes jazz")) == Decision(
        candidate=0, event="ADD", text="Uses SQLite"
    )


def test_moving_updates_where_the_user_lives() -> None:
    assert _decide("Lives in Paris", _n(7, "Lives in Berlin")) == Decision(
        candidate=0, event="UPDATE", target=7, text="Lives in Paris"
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Name is Bob", "Name is Robert"),
        ("Works at Acme", "Works at Globex"),
        ("Works as a chef", "Works as pilot"),
        ("Wife's name is Anna", "Wife's name is Anne"),
        ("Timezone is CET", "Timezone is PST"),
        ("User lives in Berlin", "Lives in Paris"),
        ("Likes jazz", "Dislikes jazz"),
        ("Dislikes jazz", "Likes Jazz"),
    ],
)
def test_single_valued_slots_and_flipped_tastes_update(old: str, new: str) -> None:
    decision = _decide(new, _n(2, "Uses Vim"), _n(9, old))
    assert (decision.event, decision.target, decision.text) == ("UPDATE", 9, new)


def test_different_slots_do_not_collide() -> None:
    for old, new in [("Sister's name is Jo", "Brother's name is Al"),
                     ("Timezone is CET", "Favorite color is blue"),
                     ("Likes jazz", "Dislikes rock"),
                     ("Uses Vim", "Uses Helix")]:
        assert _decide(new, _n(1, old)).event == "ADD"


@pytest.mark.parametrize(
    ("text", "neighbor"),
    [
        ("Lives in Berlin", "Lives in Berlin"),
        ("Lives in Berlin", "lives in  berlin."),
        ("Uses Postgres", "Uses Postgres instead of MySQL"),
        ("Works as nurse", "Works as a nurse"),
        ("Lives in Berlin", "User lives in Berlin"),
        ("Prefers tea", "prefers TEA!"),
    ],
)
def test_restatements_change_nothing(text: str, neighbor: str) -> None:
    decision = _decide(text, _n(1, "Likes jazz"), _n(4, neighbor))
    assert (decision.event, decision.target) == ("NONE", 4)


def test_stopping_deletes_the_tool() -> None:
    assert _decide("No longer uses Vim", _n(1, "Uses Emacs"), _n(2, "Uses vim")) == Decision(
        candidate=0, event="DELETE", target=2
    )
    decision = _decide("No longer uses Helix", _n(3, "Uses Helix instead of Vim"))
    assert (decision.event, decision.target) == ("DELETE", 3)


def test_stopping_something_never_recorded_changes_nothing() -> None:
    decision = _decide("No longer uses Vim", _n(1, "Uses Emacs"))
    assert (decision.event, decision.target) == ("NONE", None)


def test_using_again_after_stopping_is_added() -> None:
    assert _decide("Uses Vim", _n(1, "No longer uses Vim")).event == "ADD"


def test_unrelated_and_many_valued_facts_are_added() -> None:
    assert _decide("Prefers tea", _n(1, "Prefers coffee")).event == "ADD"
    assert _decide("Is allergic to nuts", _n(1, "Is allergic to milk")).event == "ADD"
    assert _decide("Went skiing in Norway", _n(1, "Lives in Oslo")) == Decision(
        candidate=0, event="ADD"
    )


def test_add_returns_the_cleaned_text_only_when_it_differs() -> None:
    assert _decide("Likes  jazz.").text == "Likes jazz"
    assert _decide("Likes jazz").text is None


def test_blank_candidate_is_dropped() -> None:
    assert _decide("  ...  ", _n(1, "Lives in Oslo")) == Decision(candidate=0, event="NONE")


def test_the_freshest_statement_of_a_slot_is_the_target() -> None:
    decision = _decide(
        "Lives in Rome",
        _n(30, "Lives in Berlin", "2025-03-01"),
        _n(2, "Lives in Paris", "2026-11-22"),
        _n(12, "Lives in Oslo", "2024-01-01"),
    )
    assert (decision.event, decision.target) == ("UPDATE", 2)


def test_a_user_changing_their_mind_twice_in_one_slice() -> None:
    # Wire ids as the pipeline builds them: stored rows first, then the batch's
    # earlier candidates, all dated with today's observation date.
    today = "2026-11-22"
    request = ConsolidationRequest(
        observed_at="2026-11-22 (Sunday)",
        candidates=(
            Candidate(candidate=0, text="Lives in Berlin", category="fact",
                      neighbors=(_n(1, "Lives in London", "2025-05-01"),)),
            Candidate(candidate=1, text="Lives in Paris", category="fact",
                      neighbors=(_n(1, "Lives in London", "2025-05-01"),
                                 _n(2, "Lives in Berlin", today))),
            Candidate(candidate=2, text="Uses SQLite instead of Postgres", category="decision",
                      neighbors=(_n(3, "Uses Postgres", "2025-05-01"),)),
            Candidate(candidate=3, text="Uses DuckDB instead of SQLite", category="decision",
                      neighbors=(_n(3, "Uses Postgres", "2025-05-01"),
                                 _n(4, "Uses SQLite instead of Postgres", today))),
        ),
    )
    decisions = decide(request).decisions
    assert [(d.candidate, d.event, d.target, d.text) for d in decisions] == [
        (0, "UPDATE", 1, "Lives in Berlin"),
        (1, "UPDATE", 2, "Lives in Paris"),
        (2, "UPDATE", 3, "Uses SQLite"),
        (3, "UPDATE", 4, "Uses DuckDB"),
    ]


_FACT_TEXTS = [
    "Uses Postgres", "Uses SQLite instead of Postgres", "No longer uses Postgres",
    "Uses SQLite", "Lives in Berlin", "Lives in Paris", "User lives in Oslo",
    "Name is Bob", "Wife's name is Anna", "Likes jazz", "Dislikes jazz",
    "Timezone is CET", "Prefers tea", "Works at Acme", "",
]
_texts_st = st.one_of(st.sampled_from(_FACT_TEXTS), st.text(max_size=60))


@settings(max_examples=300, deadline=None)
@given(
    batch=st.lists(
        st.tuples(
            _texts_st,
            st.lists(st.tuples(st.integers(-5, 10**6), _texts_st), max_size=8),
        ),
        max_size=6,
    )
)
def test_decisions_only_target_the_candidates_own_neighbours(
    batch: list[tuple[str, list[tuple[int, str]]]],
) -> None:
    candidates = tuple(
        Candidate(candidate=i, text=text, category="fact",
                  neighbors=tuple(_n(id_, neighbour) for id_, neighbour in neighbours))
        for i, (text, neighbours) in enumerate(batch)
    )
    answer = decide(ConsolidationRequest(observed_at="2026-11-22", candidates=candidates))
    assert [d.candidate for d in answer.decisions] == list(range(len(batch)))
    for decision, candidate in zip(answer.decisions, candidates, strict=True):
        own = {n.id for n in candidate.neighbors}
        if decision.event in ("UPDATE", "DELETE"):
            assert decision.target in own
        else:
            assert decision.target is None or decision.target in own
        if decision.event == "UPDATE":
            assert decision.text
        if decision.event == "ADD":
            assert decision.target is None


# ---------------------------------------------------------------- summaries


def _summary(previous: str | None, *messages: tuple[str, str]) -> str:
    request = SummaryRequest(
        observed_at="2026-11-22 (Sunday)",
        previous_summary=previous,
        messages=tuple(WireMessage(role=role, content=text) for role, text in messages),
    )
    return summarize(request).summary


def test_summary_appends_user_snippets_to_the_previous_one() -> None:
    text = _summary("Talked about databases.", ("user", "I  use\nPostgres."),
                    ("assistant", "Nice choice"), ("user", "   "), ("user", "Thanks!"))
    assert text == "Talked about databases.\n- I use Postgres.\n- Thanks!"


def test_summary_without_anything_new() -> None:
    assert _summary(None) == ""
    assert _summary("Kept as it was.", ("assistant", "hello")) == "Kept as it was."


def test_summary_keeps_the_newest_tail_within_the_limit() -> None:
    messages = [("user", f"message number {i} " + "filler " * 40) for i in range(40)]
    text = _summary("old summary " * 100, *messages)
    assert len(text) <= 1000
    assert "message number 39" in text
    assert "message number 0 " not in text
    assert text.startswith("- message number")  # cut at a line, not mid-word
    assert _summary(None, *messages) == text  # the old summary fell off the end anyway


def test_long_messages_become_short_snippets() -> None:
    text = _summary(None, ("user", "word " * 500))
    assert text.startswith("- word word")
    assert text.endswith("\u2026")
    assert len(text) <= 2 + 160


def test_summary_of_one_huge_line_is_still_bounded() -> None:
    assert len(_summary("z" * 5000)) == 1000


# ---------------------------------------------------------------- the providers


async def test_providers_wrap_the_pure_functions() -> None:
    extractor: Extractor = RulesExtractor()
    consolidator: Consolidator = RulesConsolidator()
    summarizer: Summarizer = RulesSummarizer()

    extracted = await extractor.extract(_extraction("I live in Oslo"))
    assert extracted.value == extract_facts(_extraction("I live in Oslo"))
    assert (extracted.usage, extracted.model) == (Usage(0, 0), "rules-v1")

    request = ConsolidationRequest(
        observed_at="2026-11-22",
        candidates=(Candidate(candidate=0, text="Lives in Oslo", category="fact",
                              neighbors=(_n(1, "Lives in Bergen"),)),),
    )
    consolidated = await consolidator.consolidate(request)
    assert consolidated.value == decide(request)
    assert (consolidated.usage, consolidated.model) == (Usage(0, 0), "rules-v1")

    summary_request = SummaryRequest(observed_at="2026-11-22", previous_summary=None,
                                     messages=(WireMessage(role="user", content="hi"),))
    summarised = await summarizer.summarize(summary_request)
    assert summarised.value.summary == "- hi"
    assert (summarised.usage, summarised.model) == (Usage(0, 0), "rules-v1")
