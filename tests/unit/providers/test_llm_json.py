"""Strict-mode schemas derived from the wire models, and tolerant answer parsing."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from worker.errors import ProviderAnswerInvalid
from worker.providers.llm_json import (
    json_candidates,
    json_schema_format,
    parse_answer,
    strict_schema,
    strip_reasoning,
)
from worker.providers.wire import (
    CATEGORIES,
    ConsolidationAnswer,
    Decision,
    ExtractedFact,
    ExtractionAnswer,
    SummaryAnswer,
)

ANSWERS = (ExtractionAnswer, ConsolidationAnswer, SummaryAnswer)
PRIVATE = "my passport number is X1234567"


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    yield from _nodes(sub)
            else:
                yield from _nodes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _nodes(item)


# ---------------------------------------------------------------- schemas


@pytest.mark.parametrize("model", ANSWERS)
def test_every_object_is_closed_and_fully_required(model: type[BaseModel]) -> None:
    schema = strict_schema(model)
    objects = [n for n in _nodes(schema) if n.get("type") == "object"]
    assert objects
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])


@pytest.mark.parametrize("model", ANSWERS)
def test_no_references_titles_defaults_or_length_limits(model: type[BaseModel]) -> None:
    text = json.dumps(strict_schema(model))
    for keyword in ("$ref", "$defs", "title", "default", "maxLength", "minLength",
                    "minimum", "maximum"):
        assert f'"{keyword}"' not in text


def test_extraction_schema_shape() -> None:
    fact = strict_schema(ExtractionAnswer)["properties"]["facts"]["items"]
    assert fact["properties"]["category"]["enum"] == list(CATEGORIES)
    assert fact["properties"]["importance"]["type"] == "integer"
    assert "1 to 10" in fact["properties"]["importance"]["description"]
    assert fact["properties"]["text"] == {"type": "string"}


def test_consolidation_schema_nullables_and_enum() -> None:
    decision = strict_schema(ConsolidationAnswer)["properties"]["decisions"]["items"]
    props = decision["properties"]
    assert props["event"]["enum"] == ["ADD", "UPDATE", "DELETE", "NONE"]
    assert props["target"]["type"] == ["integer", "null"]
    assert props["text"]["type"] == ["string", "null"]
    assert decision["required"] == ["candidate", "event", "target", "text"]


class _Inner(BaseModel):
    title: str  # a property named like a dropped keyword must survive
    score: int = Field(ge=0, le=5)


class _Outer(BaseModel):
    inner: _Inner
    maybe: _Inner | None = None
    items: list[_Inner]


def test_nested_models_are_inlined_and_property_names_kept() -> None:
    schema = strict_schema(_Outer)
    assert "$defs" not in json.dumps(schema)
    inner = schema["properties"]["inner"]
    assert list(inner["properties"]) == ["title", "score"]
    assert inner["required"] == ["title", "score"]
    # A nullable object cannot collapse to a type list; it stays anyOf, each closed.
    branches = schema["properties"]["maybe"]["anyOf"]
    assert {"type": "null"} in branches
    assert schema["required"] == ["inner", "maybe", "items"]


def test_json_schema_format_wraps_name_and_strict() -> None:
    fmt = json_schema_format("fact_extraction", ExtractionAnswer)
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "fact_extraction"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == strict_schema(ExtractionAnswer)


# ---------------------------------------------------------------- parsing

ANSWER = ExtractionAnswer(facts=(
    ExtractedFact(text="Lives in Lyon", category="fact", importance=8),
    ExtractedFact(text="Prefers {curly} braces", category="preference", importance=3),
))
RAW = ANSWER.model_dump_json()


@pytest.mark.parametrize("content", [
    RAW,
    f"  {RAW}\n",
    f"<think>I need {{json}} here</think>{RAW}",
    f"<THINKING>\nplan: {{\"facts\": 1}}\n</THINKING>\n{RAW}",
    f"```json\n{RAW}\n```",
    f"Here is the answer {{as asked}}:\n```\n{RAW}\n```\nAnything else {{:)}}?",
    f"<think>a</think>Sure.\n```json\n{json.dumps(json.loads(RAW), indent=2)}\n```",
    f"{{\"note\": 1}} then {RAW}",  # an object that does not validate comes first
])
def test_parse_repairs_the_text_around_the_answer(content: str) -> None:
    assert parse_answer(content, ExtractionAnswer) == ANSWER


def test_a_bare_list_is_wrapped_for_a_one_field_model() -> None:
    bare = json.dumps([f.model_dump() for f in ANSWER.facts])
    assert parse_answer(bare, ExtractionAnswer) == ANSWER


def test_consolidation_answer_parses_with_nulls() -> None:
    content = '{"decisions": [{"candidate": 0, "event": "ADD", "target": null, "text": null}]}'
    answer = parse_answer(content, ConsolidationAnswer)
    assert answer.decisions == (Decision(candidate=0, event="ADD"),)


@pytest.mark.parametrize("content", [None, "", "   "])
def test_empty_answers_are_invalid(content: str | None) -> None:
    with pytest.raises(ProviderAnswerInvalid, match="empty"):
        parse_answer(content, ExtractionAnswer)


def test_truncated_json_is_invalid() -> None:
    with pytest.raises(ProviderAnswerInvalid, match="no complete JSON"):
        parse_answer(RAW[:20], ExtractionAnswer)
    # Cut after a whole inner object: that object is found, and breaks the schema.
    with pytest.raises(ProviderAnswerInvalid, match="schema"):
        parse_answer(RAW[: len(RAW) // 2 + 20], ExtractionAnswer)


def test_unclosed_reasoning_without_json_is_invalid() -> None:
    with pytest.raises(ProviderAnswerInvalid):
        parse_answer("<think>still thinking about it", ExtractionAnswer)


def test_schema_breaks_name_the_place_but_never_the_text() -> None:
    content = json.dumps({"facts": [{"text": PRIVATE, "category": "opinion", "importance": 42}]})
    with pytest.raises(ProviderAnswerInvalid) as caught:
        parse_answer(content, ExtractionAnswer)
    message = str(caught.value)
    assert "facts.0.category" in message
    assert "X1234567" not in message and "passport" not in message
    assert caught.value.__cause__ is None  # the pydantic error would quote the input


def test_extra_keys_are_dropped_and_never_named() -> None:
    # Small models in json_object mode add keys of their own (issue 38): dropped.
    content = json.dumps({"facts": [{"text": "Uses Go", "category": "fact", "importance": 5,
                                     "reasoning": "said so", PRIVATE: 1}], PRIVATE: 2})
    assert parse_answer(content, ExtractionAnswer).facts[0].text == "Uses Go"
    content = json.dumps({"decisions": [{"candidate": 0, "event": "ADD", "why": 1}]})
    assert parse_answer(content, ConsolidationAnswer).decisions[0].event == "ADD"
    # Beside a value the schema refuses they still break it, and, since a key is the
    # model's text as much as a value is (it may quote the user), are not named.
    content = json.dumps({"facts": [{"text": "x", "category": "opinion", "importance": 5,
                                     "reasoning": 1, PRIVATE: 2}]})
    with pytest.raises(ProviderAnswerInvalid, match=r"\(unknown key\): extra_forbidden") as caught:
        parse_answer(content, ExtractionAnswer)
    assert "passport" not in str(caught.value) and "reasoning" not in str(caught.value)


def test_strip_reasoning_keeps_the_rest() -> None:
    assert strip_reasoning("a<think>x\ny</think>b<reasoning k=1>z</reasoning>c") == "abc"


def test_json_candidates_offer_only_outermost_objects() -> None:
    text = 'x {"a": {"b": 1}} y {broken "c": [1, {"d": 2}] } {"e": "}"}'
    assert list(json_candidates(text)) == [{"a": {"b": 1}}, {"d": 2}, {"e": "}"}]


# ---------------------------------------------------------------- properties

_prose = st.text(alphabet=st.characters(blacklist_characters="{}<`"), max_size=80)
_facts = st.lists(
    st.builds(
        ExtractedFact,
        text=st.text(min_size=1, max_size=60),
        category=st.sampled_from(CATEGORIES),
        importance=st.integers(1, 10),
    ),
    max_size=5,
).map(lambda facts: ExtractionAnswer(facts=tuple(facts)))


@settings(max_examples=200, deadline=None)
@given(answer=_facts, before=_prose, after=_prose, thought=st.text(max_size=80),
       fenced=st.booleans(), indent=st.sampled_from([None, 2]))
def test_any_answer_survives_any_wrapping(
    answer: ExtractionAnswer, before: str, after: str, thought: str, fenced: bool,
    indent: int | None,
) -> None:
    body = json.dumps(answer.model_dump(mode="json"), indent=indent, ensure_ascii=False)
    if fenced:
        body = f"```json\n{body}\n```"
    thought = thought.replace("</think>", "")
    content = f"<think>{thought}</think>{before}{body}{after}"
    assert parse_answer(content, ExtractionAnswer) == answer


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parsing_never_fails_with_anything_but_provider_answer_invalid(content: str) -> None:
    with contextlib.suppress(ProviderAnswerInvalid):
        parse_answer(content, ConsolidationAnswer)
    for candidate in json_candidates(content):
        assert isinstance(candidate, dict)
