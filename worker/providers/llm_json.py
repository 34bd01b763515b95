"""JSON in and out of chat models: strict-mode schemas and tolerant answer parsing.

Pure functions only. The schemas are derived from the wire models, so the
contract lives in one place (worker/providers/wire.py); the derivation rewrites
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
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from worker.errors import ProviderAnswerInvalid

M = TypeVar("M", bound=BaseModel)

# Keywords that carry no meaning for the model or that strict mode rejects.
_DROPPED_KEYWORDS = frozenset({
    "title", "default", "minLength", "maxLength", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems", "pattern", "format",
})
# A reasoning block's opening tag (attributes bounded), and what ends a closing one.
_REASONING_OPEN = re.compile(r"<(think|thinking|reasoning)\b[^>]{0,200}>", re.IGNORECASE)
_CLOSE_TAIL = re.compile(r"\s*>")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_MAX_ERRORS_SHOWN = 3
# Longer answers are refused before any parsing: every step below is linear, and
# this bounds the constant. Far above a real answer (20 facts of 1,000 characters
# and a long reasoning block); it bounds what a broken or hostile endpoint costs.
MAX_ANSWER_CHARS = 262_144
# JSON objects tried from this many "{" at most: each failed try costs up to the
# text's length (the decoder's error locates its line), so the number is capped.
MAX_JSON_STARTS = 64


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


def _close_of(lowered: str, name: str, start: int) -> tuple[int, int] | None:
    """Where the first ``</name>`` at or after ``start`` begins and ends, if any."""
    tag = "</" + name
    at = lowered.find(tag, start)
    while at != -1:
        tail = _CLOSE_TAIL.match(lowered, at + len(tag))
        if tail is not None:
            return at, tail.end()
        at = lowered.find(tag, at + len(tag))
    return None


def strip_reasoning(text: str) -> str:
    """Drop closed ``<think>`` (and ``<thinking>``/``<reasoning>``) blocks.

    Each block ends at the first closing tag of its name, as a lazy pattern
    would have it, but found in linear time: the closing tag last found for a
    name is remembered, so many openings never rescan the text after them.
    """
    lowered = text.translate(_ASCII_LOWER)  # same length: positions carry over
    kept: list[str] = []
    kept_from = pos = 0
    # Per name: where its last search started, and what it found (None: no close after).
    closes: dict[str, tuple[int, tuple[int, int] | None]] = {}
    while (opening := _REASONING_OPEN.search(text, pos)) is not None:
        name, after = opening[1].lower(), opening.end()
        known = closes.get(name)
        if known is not None and known[0] <= after and (
                known[1] is None or after <= known[1][0]):
            close = known[1]
        else:
            close = _close_of(lowered, name, after)
            closes[name] = (after, close)
        if close is None:
            pos = opening.start() + 1  # never closed: not a block, and the text goes on
            continue
        kept.append(text[kept_from : opening.start()])
        kept_from = pos = close[1]
    kept.append(text[kept_from:])
    return "".join(kept)


def json_candidates(text: str) -> Iterator[Any]:
    """Every outermost JSON object in ``text``, left to right, from the first
    MAX_JSON_STARTS opening braces.

    Scanning with ``raw_decode`` from each ``{`` handles braces inside strings;
    after a hit the scan resumes past it, so an inner object is offered on its
    own only when the text around it is not JSON (prose braces, a cut answer).
    """
    decoder = json.JSONDecoder()
    index = text.find("{")
    for _ in range(MAX_JSON_STARTS):
        if index == -1:
            return
        try:
            value, end = decoder.raw_decode(text, index)
        # ValueError: also a number past Python's 4,300-digit int conversion limit.
        except (ValueError, RecursionError):
            index = text.find("{", index + 1)
            continue
        yield value
        index = text.find("{", end)


def describe_errors(exc: ValidationError) -> str:
    # Locations and error kinds only: ``str(exc)`` would quote the input. A key the
    # schema does not know is the answer's text too, so it is not named.
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:_MAX_ERRORS_SHOWN]:
        loc = list(error["loc"])
        if error["type"] == "extra_forbidden" and loc:
            loc[-1] = "(unknown key)"
        where = ".".join(str(p) for p in loc) or "(root)"
        parts.append(f"{where}: {error['type']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _wrap_bare_list(value: Any, model: type[M]) -> Any:
    """``[...]`` for a one-field model such as ``{"facts": [...]}``: small models do this.
    Fields after the first that have defaults (extraction's optional notes) keep them."""
    if isinstance(value, list) and _one_list_field(model):
        return {next(iter(model.model_fields)): value}
    return value


def _one_list_field(model: type[BaseModel]) -> bool:
    """Whether ``model`` is one required field and, maybe, optional ones after it."""
    fields = list(model.model_fields)
    return bool(fields) and all(not model.model_fields[f].is_required() for f in fields[1:])


def _field_models(annotation: Any) -> list[type[BaseModel]]:
    """The models a field holds: itself, or those inside a tuple, list or union."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _field_models(arg)]


def drop_unknown_keys(value: Any, model: type[BaseModel]) -> Any:
    """``value`` without the keys ``model`` (and the models inside it) does not know.

    Small models in json_object mode add keys of their own ("reason", "confidence")
    to otherwise good answers; the wire models forbid extra keys, so without this
    every such answer is unusable (issue 38). Only keys are dropped: a value the
    schema refuses is still refused.
    """
    if isinstance(value, list):
        return [drop_unknown_keys(item, model) for item in value]
    if not isinstance(value, dict):
        return value
    kept: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name not in value:
            continue
        inner = _field_models(info.annotation)
        kept[name] = drop_unknown_keys(value[name], inner[0]) if len(inner) == 1 \
            else value[name]
    return kept


def parse_answer(content: str | None, model: type[M]) -> M:
    """Validate a chat answer as ``model``, repairing only the text around the JSON.

    Raises ProviderAnswerInvalid (no answer text in the message) when no JSON
    object in the answer validates.
    """
    if content is None or not content.strip():
        raise ProviderAnswerInvalid("the answer was empty")
    if len(content) > MAX_ANSWER_CHARS:
        raise ProviderAnswerInvalid(
            f"the answer is {len(content)} characters long, above the {MAX_ANSWER_CHARS} read")
    try:
        return model.model_validate_json(content)
    except ValidationError as exc:
        first_error = describe_errors(exc)
    # The direct parse failed: look for the answer inside reasoning, fences or prose.
    cleaned = strip_reasoning(content).strip()
    try:
        whole = json.loads(cleaned)
    except (ValueError, RecursionError):  # JSONDecodeError, or a 4,301-digit number
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
            if all(e["type"] == "extra_forbidden" for e in exc.errors(include_input=False)):
                try:
                    return model.model_validate(drop_unknown_keys(candidate, model))
                except ValidationError as again:
                    last_error = describe_errors(again)
    if not candidates:
        raise ProviderAnswerInvalid("the answer holds no complete JSON object")
    raise ProviderAnswerInvalid(f"the answer breaks the {model.__name__} schema: {last_error}")


def salvage_items(content: str | None, model: type[M]) -> M | None:
    """The complete items of an answer cut off at the token limit, for a model of one
    list field (``{"facts": [...]}``; other fields optional, left at their defaults):
    each item once, in order; None when none is complete and valid.

    Only for an answer the server says it cut (finish reason ``length``): a small model
    that runs away repeats its items until the limit, and asking again unchanged at
    temperature 0 brings the same answer back (issue 38). Items after the cut are lost;
    an item the schema refuses is left out, as the rest of the answer is still usable.
    """
    fields = list(model.model_fields)
    # The first field is the list; others must have defaults (extraction's optional
    # notes, lost with a cut answer: its facts are what is salvaged).
    if content is None or not _one_list_field(model) or len(content) > MAX_ANSWER_CHARS:
        return None
    inner = _field_models(model.model_fields[fields[0]].annotation)
    if len(inner) != 1:
        return None
    text = strip_reasoning(content)
    opening = re.search(r'"' + re.escape(fields[0]) + r'"\s*:\s*\[', text)
    if opening is not None:
        pos = opening.end()
    elif text.lstrip().startswith("["):  # a bare list, as small models send
        pos = text.index("[") + 1
    else:
        return None
    decoder = json.JSONDecoder()
    items: dict[str, BaseModel] = {}
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):  # the cut, or the list's end
            break
        try:
            item = inner[0].model_validate(drop_unknown_keys(value, inner[0]))
        except ValidationError:
            continue
        items.setdefault(item.model_dump_json(), item)
    if not items:
        return None
    return model.model_validate({fields[0]: list(items.values())})
