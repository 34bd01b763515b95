"""JSON in and out of chat models: strict-mode schemas and tolerant answer parsing.

Pure functions only. The schemas are derived from the wire models, so the
contract lives in one place (worker/wire.py); the derivation rewrites
pydantic's JSON schema into the subset OpenAI's strict mode accepts. Range and
length limits that strict mode may not accept are dropped from the schema:
pydantic still checks them when the answer is parsed.

Parsing accepts what real endpoints send in json_object mode: reasoning blocks
(``<think>``), Markdown fences and prose around the JSON. Error messages name
locations and error kinds, never the answer's text, which may quote the user.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from worker.errors import ProviderAnswerInvalid

M = TypeVar("M", bound=BaseModel)

# Keywords that carry no meaning for the model or that strict mode rejects.
_DROPPED_KEYWORDS = frozenset({
    "title", "default", "minLength", "maxLength", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "pattern", "format",
})
_REASONING = re.compile(
    r"<(think|thinking|reasoning)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL
)
_MAX_ERRORS_SHOWN = 3


# ---------------------------------------------------------------- schemas


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    """Inline every $ref: some strict-mode servers do not follow references."""
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if name not in defs:
            raise ValueError(f"unresolvable schema reference {name!r}")
        return _resolve(defs[name], defs)
    return {key: _resolve(value, defs) for key, value in node.items() if key != "$defs"}


def _collapse_nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [{type: X}, {type: null}]`` becomes ``type: [X, "null"]``."""
    branches = node.get("anyOf")
    if not isinstance(branches, list):
        return node
    simple = all(isinstance(b, dict) and set(b) == {"type"} for b in branches)
    if not simple:
        return node
    types: list[str] = []
    for branch in branches:
        kind = branch["type"]
        for t in kind if isinstance(kind, list) else [kind]:
            if t not in types:
                types.append(t)
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    return {**rest, "type": types[0] if len(types) == 1 else types}


def _strictify(node: Any) -> Any:
    if isinstance(node, list):
        return [_strictify(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: _strictify(v)
        for k, v in node.items()
        if k not in _DROPPED_KEYWORDS and k != "properties"
    }
    if "properties" in node:
        # A property's name is not a keyword: one called "title" must stay.
        out["properties"] = {name: _strictify(sub) for name, sub in node["properties"].items()}
    out = _collapse_nullable(out)
    if "minimum" in node and "maximum" in node and "description" not in out:
        # The range leaves the schema, so it is said in words the model reads.
        out["description"] = f"an integer from {node['minimum']} to {node['maximum']}"
    if out.get("type") == "object" or "properties" in out:
        out["type"] = "object"
        out["properties"] = out.get("properties", {})
        # Strict mode: every property required (nullable ones say so by type).
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    if "const" in out and "enum" not in out:  # single-value Literal
        out["enum"] = [out.pop("const")]
    return out


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model`` in the form strict structured outputs accept."""
    raw = model.model_json_schema()
    defs = raw.get("$defs", {})
    schema = _strictify(_resolve(raw, defs))
    if not isinstance(schema, dict):  # pragma: no cover - pydantic always gives an object
        raise TypeError("a model schema must be a JSON object")
    return schema


def json_schema_format(name: str, model: type[BaseModel]) -> dict[str, Any]:
    """The ``response_format`` body for strict json_schema mode."""
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "strict": True, "schema": strict_schema(model)},
    }


# ---------------------------------------------------------------- parsing


def strip_reasoning(text: str) -> str:
    """Drop closed ``<think>`` (and ``<thinking>``/``<reasoning>``) blocks."""
    return _REASONING.sub("", text)


def json_candidates(text: str) -> Iterator[Any]:
    """Every outermost JSON object in ``text``, left to right.

    Scanning with ``raw_decode`` from each ``{`` handles braces inside strings;
    after a hit the scan resumes past it, so an inner object is offered on its
    own only when the text around it is not JSON (prose braces, a cut answer).
    """
    decoder = json.JSONDecoder()
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        yield value
        index = text.find("{", end)


def describe_errors(exc: ValidationError) -> str:
    # Locations and error kinds only: ``str(exc)`` would quote the input.
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:_MAX_ERRORS_SHOWN]:
        where = ".".join(str(p) for p in error["loc"]) or "(root)"
        parts.append(f"{where}: {error['type']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _wrap_bare_list(value: Any, model: type[M]) -> Any:
    """``[...]`` for a one-field model such as ``{"facts": [...]}``: small models do this."""
    fields = list(model.model_fields)
    if isinstance(value, list) and len(fields) == 1:
        return {fields[0]: value}
    return value


def parse_answer(content: str | None, model: type[M]) -> M:
    """Validate a chat answer as ``model``, repairing only the text around the JSON.

    Raises ProviderAnswerInvalid (no answer text in the message) when no JSON
    object in the answer validates.
    """
    if content is None or not content.strip():
        raise ProviderAnswerInvalid("the answer was empty")
    try:
        return model.model_validate_json(content)
    except ValidationError as exc:
        first_error = describe_errors(exc)
    # The direct parse failed: look for the answer inside reasoning, fences or prose.
    cleaned = strip_reasoning(content).strip()
    try:
        whole = json.loads(cleaned)
    except json.JSONDecodeError:
        candidates: list[Any] = list(json_candidates(cleaned))
    else:
        candidates = [_wrap_bare_list(whole, model)]
    last_error = first_error
    for candidate in candidates:
        try:
            return model.model_validate(candidate)
        except ValidationError as exc:
            # Not chained: the validation error carries the answer's text.
            last_error = describe_errors(exc)
    if not candidates:
        raise ProviderAnswerInvalid("the answer holds no complete JSON object")
    raise ProviderAnswerInvalid(f"the answer breaks the {model.__name__} schema: {last_error}")
