"""The offline rules' wider reading (issue 40): introductions, jobs and tools, diets and
identities, their negations and changes, what must not be taken for them, and the
bounds every pattern keeps."""

from __future__ import annotations

import re
import re._parser as sre_parse  # the parse tree of a pattern, to find nested repetition
from typing import Any

import pytest

from worker.providers import rules, rules_patterns, rules_time
from worker.providers.rules import MAX_CLAUSE_CHARS, decide, extract_facts
from worker.providers.rules_patterns import Slot, parse_fact
from worker.providers.wire import (
    MAX_FACT_CHARS,
    Candidate,
    ConsolidationRequest,
    Decision,
    ExtractionRequest,
    Neighbor,
    WireMessage,
)


def _texts(*user: str) -> list[str]:
    request = ExtractionRequest(
        observed_at="2026-11-22 (Sunday)", summary=None, context=(),
        messages=tuple(WireMessage(role="user", content=text) for text in user))
    return [fact.text for fact in extract_facts(request).facts]


def _decide(text: str, *neighbours: str) -> tuple[str, int | None, str | None]:
    request = ConsolidationRequest(observed_at="2026-11-22 (Sunday)", candidates=(Candidate(
        candidate=0, text=text, category="fact",
        neighbors=tuple(Neighbor(id=i, text=n, observed_at="2026-01-01")
                        for i, n in enumerate(neighbours, start=1))),))
    (decision,) = decide(request).decisions
    return decision.event, decision.target, decision.text


# ---------------------------------------------------------------- what is read


@pytest.mark.parametrize(
    ("said", "fact", "category", "importance"),
    [
        # introductions
        ("I'm Grace", "Name is Grace", "fact", 9),
        ("I am Grace Hopper.", "Name is Grace Hopper", "fact", 9),
        ("Hi I'm Zoë", "Name is Zoë", "fact", 9),
        ("Hello there I'm Émile", "Name is Émile", "fact", 9),
        ("I'm Grace from Oslo", "Name is Grace", "fact", 9),
        ("I'm Grace here", "Name is Grace", "fact", 9),
        ("call me Gigi", "Name is Gigi", "fact", 9),
        # work and tools
        ("I work with Rust these days.", "Works with Rust", "preference", 6),
        ("I work with Rust at my job", "Works with Rust", "preference", 6),
        ("I'm working with Terraform for a client", "Works with Terraform", "preference", 6),
        ("I work with children", "Works with children", "preference", 6),
        ("I'm a nurse", "Works as nurse", "fact", 7),
        ("I'm an accountant now.", "Works as accountant", "fact", 7),
        ("I am a senior data scientist", "Works as senior data scientist", "fact", 7),
        ("I'm a nurse at St Mary's", "Works as nurse", "fact", 7),
        ("So I'm a Python developer", "Works as Python developer", "fact", 7),
        ("I'm working as a barista", "Works as barista", "fact", 7),
        ("I'm using Neovim these days", "Uses Neovim", "preference", 6),
        ("I've switched to Zig", "Uses Zig", "decision", 6),
        ("I've been using Neovim for years", "Uses Neovim", "preference", 6),
        # diets and identities
        ("I am vegetarian", "Is vegetarian", "fact", 8),
        ("I'm vegan", "Is vegan", "fact", 8),
        ("I'm a vegetarian", "Is vegetarian", "fact", 8),
        ("I'm Vegan now", "Is vegan", "fact", 8),
        ("I'm strictly plant-based", "Is plant-based", "fact", 8),
        ("I'm lactose intolerant", "Is lactose intolerant", "fact", 8),
        ("I'm gluten-free", "Is gluten-free", "fact", 8),
        ("I don't eat meat any more", "Does not eat meat", "fact", 7),
        ("I don't eat pork", "Does not eat pork", "fact", 7),
        ("I've stopped eating red meat", "Does not eat red meat", "fact", 7),
        ("I eat fish again", "Eats fish", "fact", 7),
        ("I've started eating chicken", "Eats chicken", "fact", 7),
        ("I'm allergic to peanuts", "Is allergic to peanuts", "fact", 9),
        # negations and changes
        ("I'm not vegetarian any more", "Is no longer vegetarian", "fact", 8),
        ("I'm not a vegan anymore", "Is no longer vegan", "fact", 8),
        ("I'm no longer vegan", "Is no longer vegan", "fact", 8),
        ("I stopped being vegetarian", "Is no longer vegetarian", "fact", 8),
        ("I'm not vegetarian", "Is not vegetarian", "fact", 8),
        ("I'm no longer allergic to cats", "Is no longer allergic to cats", "fact", 9),
        ("I'm not allergic to shellfish", "Is not allergic to shellfish", "fact", 9),
        ("I stopped using Vim", "No longer uses Vim", "decision", 6),
        ("I no longer work with Java", "No longer works with Java", "decision", 6),
        ("I don't work with PHP any more", "No longer works with PHP", "decision", 6),
        ("I no longer work at Acme", "No longer works at Acme", "fact", 7),
        ("I don't work for Acme anymore", "No longer works at Acme", "fact", 7),
        ("I'm no longer working at Acme", "No longer works at Acme", "fact", 7),
        ("I quit my job at Acme", "No longer works at Acme", "fact", 7),
        ("I no longer work as a chef", "No longer works as chef", "fact", 7),
        ("I'm no longer a nurse", "No longer works as nurse", "fact", 7),
        ("I'm not a teacher any more", "No longer works as teacher", "fact", 7),
        ("I no longer live in Oslo", "No longer lives in Oslo", "fact", 8),
        ("I don't live in Oslo any more", "No longer lives in Oslo", "fact", 8),
        ("I moved away from Oslo", "No longer lives in Oslo", "fact", 8),
        ("I moved from Oslo to Bergen", "Moved from Oslo to Bergen", "fact", 7),
        ("We've relocated from Leeds to York", "Moved from Leeds to York", "fact", 7),
        ("I moved back to Oslo", "Lives in Oslo", "fact", 8),
    ],
)
def test_each_new_pattern(said: str, fact: str, category: str, importance: int) -> None:
    request = ExtractionRequest(observed_at="2026-11-22 (Sunday)", summary=None, context=(),
                                messages=(WireMessage(role="user", content=said),))
    (extracted,) = extract_facts(request).facts
    assert (extracted.text, extracted.category, extracted.importance) == (
        fact, category, importance)


def test_an_introduction_and_a_city_in_one_sentence() -> None:
    assert _texts("Hi, I'm Grace and I live in Oslo.") == ["Name is Grace", "Lives in Oslo"]
    assert _texts("Hey, I'm Sam, I'm a nurse and I'm vegan.") == [
        "Name is Sam", "Works as nurse", "Is vegan"]
    assert _texts("I'm not vegan any more, I'm vegetarian now.") == [
        "Is no longer vegan", "Is vegetarian"]


@pytest.mark.parametrize(
    "said",
    [
        # states, "-ing" forms and fillers, in any case
        "I'm tired", "I'm Tired", "I'm sorry", "I'm Sorry!", "I'm going home",
        "I'm Going Home", "I'm not sure", "I'm Not Sure", "I'm Fine Thanks", "I'm OK",
        "I'm New here", "I'm Feeling Lucky", "I'm Back", "I'm Here", "I'm Still Standing",
        # nationalities, faiths, diets: capitalised but not names
        "I'm Canadian", "I'm South African", "I'm British, by the way", "I'm Jewish",
        "I'm Catholic", "I'm Dutch",
        # shouting, possessives, reported speech, other languages
        "I'M GRACE", "I'm Bob's brother", "My friend said I'm Tom", "Im Sommer",
        "She says I'm vegan", "My sister is vegan", "He thinks I'm a nurse",
        # a name must be the whole clause: not the start of a longer one
        "I'm Grace's mother", "I'm Grace and",
        # "I'm a <not a job>"
        "I'm a huge fan of jazz", "I'm a bit tired", "I'm a retired teacher",
        "I'm a terrible cook", "I'm a home cook", "I'm a fan of the chef", "I'm a Leo",
        "I'm a student", "I'm a big believer in testing", "I'm an aspiring writer",
        # not diets, or not said as one
        "I'm vegan-curious", "I'm mostly vegetarian", "I'm not sure",
        # not tools, not food, and retractions of nothing readable
        "I work with my team", "I work with them", "I work with a lot of data",
        "I don't eat much", "I don't eat out", "I'm not allergic to it at all",
        # questions stay questions
        "Am I vegetarian?", "Should I go vegan", "Is she a nurse?",
    ],
)
def test_false_positives_yield_nothing(said: str) -> None:
    assert _texts(said) == []


# ---------------------------------------------------------------- reading facts back


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("Works with Rust", Slot("uses", "works with", "Rust")),
        ("No longer works with Java", Slot("stopped", "", "Java")),
        ("Is vegetarian", Slot("single", "diet", "vegetarian")),
        ("User is vegan.", Slot("single", "diet", "vegan")),
        ("Is no longer vegetarian", Slot("ended", "", "Is vegetarian")),
        ("Is not allergic to cats", Slot("ended", "", "Is allergic to cats")),
        ("No longer lives in Oslo", Slot("ended", "", "Lives in Oslo")),
        ("No longer works at Acme", Slot("ended", "", "Works at Acme")),
        ("No longer works as nurse", Slot("ended", "", "Works as nurse")),
        ("Moved from Oslo to Bergen", Slot("move", "", "Bergen", "Oslo")),
        ("Does not eat meat", Slot("avoids", "", "meat")),
        ("Doesn't eat meat", Slot("avoids", "", "meat")),
        ("Eats fish", Slot("eats", "", "fish")),
    ],
)
def test_parse_new_shapes(text: str, slot: Slot) -> None:
    assert parse_fact(text) == slot


@pytest.mark.parametrize("text", ["Is gluten-free", "Is lactose intolerant",
                                  "Is allergic to cats"])
def test_identities_beside_a_diet_are_many_valued(text: str) -> None:
    assert parse_fact(text).kind == "other"


# ---------------------------------------------------------------- consolidation


@pytest.mark.parametrize(
    ("candidate", "neighbours", "decision"),
    [
        # a negation retracts what it names, and only that; alone it is not kept
        ("Is no longer vegetarian", ("Likes jazz", "Is vegetarian"), ("DELETE", 2, None)),
        ("Is not vegetarian", ("Is vegetarian",), ("DELETE", 1, None)),
        ("Is no longer vegetarian", ("Is vegan",), ("NONE", None, None)),
        ("Is no longer vegetarian", (), ("NONE", None, None)),
        ("No longer works at Acme", ("Works for Acme",), ("DELETE", 1, None)),
        ("No longer works at Acme", ("Works at Globex",), ("NONE", None, None)),
        ("No longer works as nurse", ("Works as a nurse",), ("DELETE", 1, None)),
        ("No longer lives in Oslo", ("User lives in Oslo",), ("DELETE", 1, None)),
        ("Is no longer allergic to cats", ("Is allergic to cats",), ("DELETE", 1, None)),
        ("Is not allergic to cats", ("Is allergic to nuts",), ("NONE", None, None)),
        ("No longer works with Java", ("Works with Java",), ("DELETE", 1, None)),
        ("No longer uses Java", ("Works with Java",), ("DELETE", 1, None)),
        # a change supersedes the earlier value, never sits beside it
        ("Is vegan", ("Is vegetarian",), ("UPDATE", 1, "Is vegan")),
        ("Works as paramedic", ("Works as nurse",), ("UPDATE", 1, "Works as paramedic")),
        ("Name is Grace", ("Name is Priya",), ("UPDATE", 1, "Name is Grace")),
        ("Does not eat meat", ("Eats meat",), ("UPDATE", 1, "Does not eat meat")),
        ("Eats meat", ("Does not eat meat",), ("UPDATE", 1, "Eats meat")),
        ("Is vegetarian", ("Is no longer vegetarian",), ("UPDATE", 1, "Is vegetarian")),
        ("Uses Kotlin instead of Scala", ("Works with Scala",),
         ("UPDATE", 1, "Works with Kotlin")),
        ("Uses Kotlin instead of Scala", ("Uses Scala",), ("UPDATE", 1, "Uses Kotlin")),
        # a move: of a place, of a tool, or of what no neighbour tells
        ("Moved from Oslo to Bergen", ("Uses Vim", "Lives in Oslo"),
         ("UPDATE", 2, "Lives in Bergen")),
        ("Moved from Acme to Globex", ("Works at Acme",), ("UPDATE", 1, "Works at Globex")),
        ("Moved from Vim to Helix", ("Lives in Oslo", "Uses Vim"), ("UPDATE", 2, "Uses Helix")),
        ("Moved from Vim to Helix", ("Works with Vim",), ("UPDATE", 1, "Works with Helix")),
        ("Moved from Oslo to Bergen", ("Lives in Bergen",), ("NONE", 1, None)),
        ("Moved from Oslo to Bergen", ("Lives in Bergen", "Lives in Oslo"), ("DELETE", 2, None)),
        ("Moved from Bergen to Oslo", ("Moved from Oslo to Bergen",),
         ("UPDATE", 1, "Moved from Bergen to Oslo")),
        ("Moved from Oslo to Bergen", ("Likes jazz",), ("ADD", None, None)),
        # restatements and neighbours of another slot
        ("Works with Rust", ("Uses Rust",), ("NONE", 1, None)),
        ("Uses Rust", ("Works with Rust",), ("NONE", 1, None)),
        ("Is vegetarian", ("User is vegetarian",), ("NONE", 1, None)),
        ("Is gluten-free", ("Is vegetarian",), ("ADD", None, None)),
        ("Works with Rust", ("Works with Go",), ("ADD", None, None)),
    ],
)
def test_changes_supersede_the_fact_they_change(
        candidate: str, neighbours: tuple[str, ...],
        decision: tuple[str, int | None, str | None]) -> None:
    assert _decide(candidate, *neighbours) == decision


def _extracted_then_decided(first: str, then: str) -> list[tuple[str, Decision]]:
    """What the rules learn from ``first``, then decide on each fact of ``then`` beside it."""
    stored = [Neighbor(id=i, text=t, observed_at="2026-01-01")
              for i, t in enumerate(_texts(first), start=1)]
    candidates = tuple(Candidate(candidate=i, text=t, category="fact", neighbors=tuple(stored))
                       for i, t in enumerate(_texts(then)))
    answer = decide(ConsolidationRequest(observed_at="2026-11-22", candidates=candidates))
    return [(c.text, d) for c, d in zip(candidates, answer.decisions, strict=True)]


@pytest.mark.parametrize(
    ("first", "then", "events"),
    [
        ("I'm vegetarian.", "Update: I'm not vegetarian anymore.", [("DELETE", 1, None)]),
        ("I'm vegetarian.", "I'm vegan now, no more cheese for me.",
         [("UPDATE", 1, "Is vegan")]),
        ("I live in Lisbon.", "I moved from Lisbon to Porto.", [("UPDATE", 1, "Lives in Porto")]),
        ("I work with Scala at my job.", "We've switched from Scala to Kotlin.",
         [("UPDATE", 1, "Works with Kotlin")]),
        ("I work at Philips.", "I no longer work at Philips.", [("DELETE", 1, None)]),
        ("I'm a nurse.", "I'm a paramedic.", [("UPDATE", 1, "Works as paramedic")]),
        ("Hi, I'm Grace.", "Actually, call me Gigi.", [("UPDATE", 1, "Name is Gigi")]),
        ("I use Vim.", "I stopped using Vim", [("DELETE", 1, None)]),
        ("I live in Oslo.", "I moved back to Oslo", [("NONE", 1, None)]),
    ],
)
def test_a_later_statement_changes_the_earlier_fact(
        first: str, then: str, events: list[tuple[str, int | None, str | None]]) -> None:
    decided = _extracted_then_decided(first, then)
    assert [(d.event, d.target, d.text) for _, d in decided] == events


# ---------------------------------------------------------------- bounds


def _unbounded_repeats_with_a_repeat_inside(tree: Any) -> list[str]:
    """Each ``X*``, ``X+`` or ``X{n,}`` whose X itself repeats: the nested quantifier
    that backtracks without bound on a long near-miss."""
    found: list[str] = []

    def repeats(items: Any) -> bool:
        return any(_kind_of(op) in _REPEATS or any(repeats(sub) for sub in _children(op, av))
                   for op, av in items)

    def walk(items: Any) -> None:
        for op, av in items:
            if _kind_of(op) in _REPEATS and av[1] == sre_parse.MAXREPEAT and repeats(av[2]):
                found.append(f"{op} {av[:2]}")
            for sub in _children(op, av):
                walk(sub)

    walk(tree)
    return found


_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def _kind_of(op: Any) -> str:
    return str(op)


def _children(op: Any, av: Any) -> list[Any]:
    kind = str(op)
    if kind in _REPEATS:
        return [av[2]]
    if kind in ("SUBPATTERN", "ATOMIC_GROUP"):
        return [av[-1]]
    if kind == "BRANCH":
        return list(av[1])
    if kind in ("ASSERT", "ASSERT_NOT"):
        return [av[1]]
    if kind == "GROUPREF_EXISTS":
        return [p for p in av[1:] if p is not None]
    return []


def _patterns() -> list[re.Pattern[str]]:
    """Every pattern of the rules provider: the rules, the parsers, and the modules' own."""
    parsers = [pattern for pattern, _, _ in rules_patterns._PARSERS]
    relations = [pattern for pattern, *_ in rules_time._RELATIONSHIP]
    own = [value for module in (rules, rules_patterns, rules_time)
           for value in vars(module).values() if isinstance(value, re.Pattern)]
    return [rule.pattern for rule in rules_patterns.RULES] + parsers + relations + own


def test_the_nested_quantifier_check_finds_one() -> None:
    assert _unbounded_repeats_with_a_repeat_inside(sre_parse.parse(r"(?:a+\s)+$"))
    assert _unbounded_repeats_with_a_repeat_inside(sre_parse.parse(r"(?:x|y*)*"))
    assert not _unbounded_repeats_with_a_repeat_inside(sre_parse.parse(r"(?:a+\s){0,3}$"))
    assert not _unbounded_repeats_with_a_repeat_inside(sre_parse.parse(r"\bi\s+use\s+(?P<v>.+)"))


@pytest.mark.parametrize("pattern", _patterns(), ids=lambda p: p.pattern[:60])
def test_no_pattern_repeats_a_repetition_without_bound(pattern: re.Pattern[str]) -> None:
    # Timing-independent: the shape that makes a regex backtrack exponentially (or
    # polynomially on a near miss) is absent; the clause cap bounds the rest.
    assert _unbounded_repeats_with_a_repeat_inside(
        sre_parse.parse(pattern.pattern, pattern.flags)) == []


LONG = 30_000


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("I'm " + "Grace " * LONG, []),  # more than three name words: no name
        ("I'm a " + "senior " * LONG + "nurse", []),  # the clause is cut before the job
        ("I'm " + "not " * LONG + "vegan", []),
        ("I moved from " * LONG, None),
        ("I don't eat " + "meat " * LONG, None),
        ("I work with x" + " at x" * LONG, ["Works with x"]),
        ("I'm not vegan" + " any more" * LONG, None),
        ("Hi " * LONG + "I'm Grace", []),
        ("I'm Grace" + ", I'm Grace" * LONG, ["Name is Grace"]),
    ],
)
def test_long_messages_give_bounded_facts(said: str, expected: list[str] | None) -> None:
    texts = _texts(said)
    assert all(1 <= len(t) <= MAX_FACT_CHARS for t in texts)
    assert all(len(t) <= MAX_CLAUSE_CHARS + 40 for t in texts)  # a value is a cut clause
    if expected is not None:
        assert texts == expected
