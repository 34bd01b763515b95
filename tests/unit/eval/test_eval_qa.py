"""`memfleet eval --qa` and `--retrieval`'s pure parts: exact match (words, dates), the
questions in the scenario files and on the moved clock, the offline answer and judge
rules (what the stub answers), the tallies and the report."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from worker.eval.haystack import DISTRACTORS
from worker.eval.qa_report import QaInfo, qa_json, qa_table
from worker.eval.qa_rules import answer_question, judge_answer, stem
from worker.eval.qa_score import QuestionScore, dates_in, exact_match, qa_by_kind, says
from worker.eval.qa_wire import UNKNOWN, AnswerRequest, JudgeRequest
from worker.eval.suite import KINDS, Question, Scenario, load_suite, shifted
from worker.read import format_block


def question(answer: str = "Madrid", **fields: Any) -> Question:
    return Question.model_validate({"ask": "Which city does the user live in?",
                                    "answer": answer, **fields})


# ---------------------------------------------------------------- exact match


@pytest.mark.parametrize(("answer", "right"), [
    ("Madrid", True),
    ("madrid.", True),  # case and punctuation
    ("The user lives in Madrid (since April).", True),  # a run of whole words
    ("MADRID!!!", True),
    ("Madridista", False),  # whole words only
    ("Madrid or Porto", False),  # names a wrong value: does not know which
    ("Porto", False),
    ("unknown", False),
    ("", False),
])
def test_exact_match_is_whole_words_cased_alike_and_no_wrong_value(answer: str,
                                                                   right: bool) -> None:
    assert exact_match(question(wrong=["Porto"]), answer) is right


def test_exact_match_takes_the_alternatives_and_multiword_answers() -> None:
    city = question("Kraków", also=["Krakow", "Cracow"])
    assert exact_match(city, "KRAKÓW") and exact_match(city, "Krakow, Poland")
    assert not exact_match(city, "Warsaw")
    ci = question("GitHub Actions", wrong=["Jenkins"])
    assert exact_match(ci, "github actions") and not exact_match(ci, "GitHub")
    assert not exact_match(ci, "GitHub Actions instead of Jenkins")
    nick = question("Joey", wrong=["Jo"])
    assert exact_match(nick, "Joey") and not exact_match(nick, "Jo")
    assert says("Call me Jo, please", "Jo") and not says("Joey", "Jo")


@pytest.mark.parametrize(("text", "dates"), [
    ("2054-03-17", {(2054, 3, 17)}),
    ("On 17 March 2054.", {(2054, 3, 17)}),
    ("the 17th of March, 2054", {(2054, 3, 17)}),
    ("March 17, 2054", {(2054, 3, 17)}),
    ("Mar. 17th 2054", {(2054, 3, 17)}),
    ("February 2054", {(2054, 2, None)}),
    ("2054-02", {(2054, 2, None)}),
    ("since 2047", {(2047, None, None)}),
    ("unknown", set()),
    ("3 weeks", set()),
])
def test_dates_are_read_in_iso_and_as_written(text: str, dates: set[Any]) -> None:
    found = dates_in(text)
    assert dates <= found
    if not dates:
        assert not found


@pytest.mark.parametrize(("gold", "answer", "right"), [
    ("2054-03-17", "2054-03-17", True),
    ("2054-03-17", "17 March 2054", True),
    ("2054-03-17", "2054-03-18", False),
    ("2054-03-17", "March 2054", False),  # less precise than the gold
    ("2054-02", "February 2054", True),
    ("2054-02", "2054-02-18", True),  # the month is right
    ("2054-02", "2054-03-18", False),
    ("2047", "Since 2047.", True),
    ("2047", "2048", False),
])
def test_a_date_answer_agrees_to_the_golds_precision(gold: str, answer: str,
                                                     right: bool) -> None:
    asked = Question(ask="When?", answer=gold, match="date", fact={"words": ["Cork"]})
    assert exact_match(asked, answer) is right


# ---------------------------------------------------------------- the questions


def test_a_question_is_checked_when_the_file_is_read() -> None:
    with pytest.raises(ValidationError, match="YYYY"):
        question("March 17", match="date", fact={"words": ["Cork"]})
    with pytest.raises(ValidationError, match="needs `fact`"):
        question("2054-03-17", match="date")
    with pytest.raises(ValidationError, match="no word"):
        question("?!")
    with pytest.raises(ValidationError, match="extra"):
        question(gold="Madrid")
    assert question("VS Code", also=["VSCode"]).gold_fact.found_in("Uses VSCode daily")
    assert question("2054-03-17", match="date",
                    fact={"words": ["Cork"]}).gold_fact.found_in("Lives in Cork")


def test_the_suite_asks_questions_of_most_kinds_and_moves_their_years() -> None:
    suite = load_suite()
    questions = [(s, q) for s in suite for q in s.questions]
    assert len(questions) >= 30
    kinds = {s.kind for s, _ in questions}
    assert len(kinds) >= len(KINDS) - 2, set(KINDS) - kinds
    for scenario, asked in questions:
        # Every gold fact is found by its own gold, and the distractors never hold it.
        if asked.match == "words":
            assert asked.gold_fact.found_in(asked.answer), (scenario.id, asked.ask)
        assert not any(asked.gold_fact.found_in(text) for text, _ in DISTRACTORS), asked.ask
        for agent in {asked.agent} - {None}:
            assert agent in {s.agent for s in scenario.sessions}
    since = next(s for s in suite if s.id == "rel-since-year")
    moved = shifted(since, 28)
    assert moved.questions[0].answer == "2047" and since.questions[0].answer == "2019"


# ---------------------------------------------------------------- the offline rules


def block(*texts: str) -> str:
    from datetime import UTC, datetime

    from tests.unit.eval.test_eval_score import fact

    at = datetime(2054, 3, 18, 10, tzinfo=UTC)
    return format_block([fact(i, t, at=at) for i, t in enumerate(texts, 1)])


@pytest.mark.parametrize(("ask", "facts", "answer"), [
    ("Which city does the user live in?", ("Lives in Madrid", "Uses Figma"), "Madrid"),
    ("What does the user work as?", ("Works as data analyst",), "data analyst"),
    ("Which CI system does the user's team use at work?",
     ("Uses GitHub Actions instead of Jenkins",), "GitHub Actions"),  # cut at "instead"
    ("Which city does the user live in?", ("Lives in Porto", "Lives in Madrid"),
     "Porto or Madrid"),  # a tie: it cannot tell which holds
    ("Which city does the user live in?", ("Lives in Vienna", "Lives in Vienna"), "Vienna"),
    ("What is the name of the user's dog?", ("Dog's name is Biscuit",), "Biscuit"),
    ("When is the user's birthday?", ("Birthday is on July 3",), "July 3"),
    # A time asked of a fact whose words hold none and no "since": the day it was said.
    ("On which date did the user move to Cork?", ("Lives in Cork",), "2054-03-18"),
    ("Which diet did the user choose?", ("Lives in Cork",), UNKNOWN),  # no shared word
])
def test_the_rules_answer_from_the_fact_sharing_most_words(ask: str, facts: tuple[str, ...],
                                                           answer: str) -> None:
    got = answer_question(AnswerRequest(question=ask, known_facts=block(*facts)))
    assert got.answer == answer


def test_a_time_question_gets_the_day_a_fact_became_true_when_the_block_says() -> None:
    from datetime import UTC, datetime

    from tests.unit.eval.test_eval_score import fact

    moved = fact(1, "Lives in Cork", at=datetime(2054, 3, 18, 10, tzinfo=UTC),
                 valid_from=datetime(2054, 3, 17, tzinfo=UTC))
    got = answer_question(AnswerRequest(question="On which date did the user move to Cork?",
                                        known_facts=format_block([moved])))
    assert got.answer == "2054-03-17"


def test_the_rules_answer_unknown_from_an_empty_block_and_stem_crudely() -> None:
    assert answer_question(AnswerRequest(question="Where?", known_facts="")).answer == UNKNOWN
    assert stem("uses") == stem("using") == stem("use")
    assert stem("lives") == stem("live") and stem("likes") != stem("dislikes")


@pytest.mark.parametrize(("reference", "answer", "correct"), [
    ("Madrid", "The user lives in madrid.", True),
    ("GitHub Actions", "GitHub", False),
    ("Madrid", "Madrid or Porto", False),  # no choice made
    ("Madrid", "unknown", False),
    ("data analyst", "analyst, data", True),  # words, not their order
])
def test_the_rules_judge_compares_words(reference: str, answer: str, correct: bool) -> None:
    verdict = judge_answer(JudgeRequest(question="?", reference=reference, answer=answer))
    assert verdict.correct is correct


# ---------------------------------------------------------------- tallies and report


def scores() -> list[QuestionScore]:
    return [
        QuestionScore("update-city", "updates", "Where?", "Madrid", "Madrid", True, True, 1,
                      rank=1, semantic_rank=2),
        QuestionScore("update-job", "updates", "Job?", "analyst", "barista", False, False, 2,
                      rank=3, semantic_rank=1),
        QuestionScore("plain-intro", "plain", "Name?", "Priya", "unknown", False, True, 0),
    ]


def test_the_kinds_sum_their_questions_in_the_suites_order() -> None:
    kinds, total = qa_by_kind(scores(), 3)
    assert [k.kind for k in kinds] == ["plain", "updates"]
    updates = kinds[1]
    assert (updates.questions, updates.exact, updates.judged, updates.right) == (2, 1, 1, 1)
    assert (updates.at_1, updates.at_k, updates.semantic_at_1, updates.facts) == (1, 2, 1, 3)
    assert (total.questions, total.exact, total.judged, total.right) == (3, 1, 2, 2)


def test_the_qa_report_names_the_models_and_the_wrong_answers() -> None:
    info = QaInfo(answered=True, retrieval=True, answer_model="m-answer", judge_model="m-judge",
                  read_top_k=50, embeddings="hashing-v1 (1536 dims)")
    text = qa_table(scores(), info)
    assert "answered by m-answer" in text and "judge m-judge" in text
    assert "qa prompt qa-" in text and "hashing-v1 (1536 dims)" in text
    assert "update-job: Job? -> 'barista' (gold 'analyst')" in text
    assert "gold fact not found by the search:\n  plain-intro: Name?" in text
    header = next(line for line in text.splitlines() if line.startswith("kind"))
    assert header.split() == ["kind", "questions", "exact", "exact", "%", "right", "right",
                              "%", "gold@1", "gold@3", "meaning@1"]
    document = qa_json(scores(), info)
    assert document["judge_model"] == "m-judge" and document["answer_model"] == "m-answer"
    assert document["total"] == {"kind": "total", "questions": 3, "exact": 1,
                                 "exact_accuracy": 0.3333, "judged": 2,
                                 "judged_accuracy": 0.6667, "gold_at_1": 1, "gold_at_3": 2,
                                 "gold_by_meaning_at_1": 1}
    plain = QaInfo(answered=True, retrieval=False, answer_model="rules-v1", judge_model=None,
                   read_top_k=50, embeddings="-")
    assert "scored by exact match" in qa_table(scores(), plain)
    assert "right" not in qa_table(scores(), plain).splitlines()[3]


def test_a_scenario_without_questions_reads_as_before() -> None:
    scenario = Scenario.model_validate({
        "id": "s", "kind": "plain", "about": "x",
        "sessions": [{"id": "s1", "at": "2026-03-02T09:00:00Z",
                      "turns": [{"role": "user", "content": "I live in Leeds."}]}],
        "expect": {"active": [{"words": ["Leeds"]}]}})
    assert scenario.questions == ()


def test_the_haystack_is_spread_evenly_over_the_scenarios_span() -> None:
    from datetime import UTC, datetime, timedelta
    from itertools import pairwise

    from worker.eval.haystack import spread

    first = datetime(2054, 3, 1, tzinfo=UTC)
    last = first + timedelta(days=30)
    moments = spread(first, last, 31)
    assert moments[0] == first and moments[-1] == last
    assert all(b - a == timedelta(days=1) for a, b in pairwise(moments))
    assert spread(first, last, 1) == [last]
    assert spread(last, first, 3) == [first] * 3, "no span: all at its end"
