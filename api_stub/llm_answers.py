"""What the LLM stub answers: the deterministic answers and their faulty variants.

A chat request's JSON user message names its ``task``; the answer comes from
the offline ``rules`` provider (for `memfleet eval --qa`'s question and judgement
tasks, from its question-answering rules, worker.eval.qa_rules). A content
fault reshapes that answer the way a misbehaving model would.
"""

from __future__ import annotations

import json
from typing import Any

from worker.eval.qa_rules import answer_question, judge_answer
from worker.eval.qa_wire import AnswerRequest, JudgeRequest
from worker.providers.rules import decide, extract_facts, summarize
from worker.providers.rules_notes import promote
from worker.providers.rules_portrait import write_portrait
from worker.providers.wire import (
    ConsolidationRequest,
    ExtractionRequest,
    NotePromotionRequest,
    PortraitRequest,
    SummaryRequest,
)

CONTENT_MODES = frozenset({"truncated", "schema_break", "unknown_ids", "aimed_ids", "prose",
                           "hostile", "quoting_break", "oversized", "extra_keys", "runaway"})
# Content modes whose answer the server reports cut at its token limit (finish reason
# "length"), as a model that runs away does.
CUT_OFF_MODES = frozenset({"runaway"})
# A "runaway" answer repeats its items this many times before the cut.
RUNAWAY_REPEATS = 12
# "oversized" answers are this long: above what the worker reads (llm_json.MAX_ANSWER_CHARS).
OVERSIZED_CHARS = 300_000
# A plausible row id of some other user: consolidation must never apply it.
FOREIGN_ID = 918_273_645


def answer_for(payload: dict[str, Any]) -> dict[str, Any]:
    """The rules provider's answer to a wire request; ValueError for unknown tasks."""
    task = payload.get("task")
    if task == "fact_extraction":
        return extract_facts(ExtractionRequest.model_validate(payload)).model_dump(mode="json")
    if task == "memory_consolidation":
        return decide(ConsolidationRequest.model_validate(payload)).model_dump(mode="json")
    if task == "session_summary":
        return summarize(SummaryRequest.model_validate(payload)).model_dump(mode="json")
    if task == "note_promotion":  # docs/notes.md
        return promote(NotePromotionRequest.model_validate(payload)).model_dump(mode="json")
    if task == "user_portrait":
        return write_portrait(PortraitRequest.model_validate(payload)).model_dump(mode="json")
    # `memfleet eval --qa`'s calls (worker.eval.qa_wire), answered by the offline
    # rules of worker.eval.qa_rules: a stand-in that picks the fact sharing the most
    # words with the question, and a judge that compares words.
    if task == "memory_question":
        return answer_question(AnswerRequest.model_validate(payload)).model_dump(mode="json")
    if task == "answer_judgement":
        return judge_answer(JudgeRequest.model_validate(payload)).model_dump(mode="json")
    raise ValueError("unknown task")


def _unknown_ids(payload: dict[str, Any]) -> dict[str, Any]:
    decisions = []
    for i, candidate in enumerate(payload.get("candidates", [])):
        offered = [n["id"] for n in candidate.get("neighbors", [])]
        target = max(offered, default=0) + 1000 if i % 2 == 0 else FOREIGN_ID
        decisions.append({"candidate": candidate["candidate"], "event": "UPDATE",
                          "target": target, "text": "Replaced by the stub"})
    return {"decisions": decisions}


def _aimed_ids(payload: dict[str, Any], targets: list[int]) -> dict[str, Any]:
    """Every candidate's one decision aimed at ``targets`` (the test's choice: another
    user's real row ids, say), candidate i at targets[i % len], UPDATE and DELETE by turns."""
    decisions = []
    for i, candidate in enumerate(payload.get("candidates", [])):
        update = i % 2 == 0
        decisions.append({"candidate": candidate["candidate"],
                          "event": "UPDATE" if update else "DELETE",
                          "target": targets[i % len(targets)],
                          "text": "Replaced by the stub" if update else None})
    return {"decisions": decisions}


_SCHEMA_BREAKS: dict[str | None, Any] = {
    "fact_extraction": {"facts": [{"fact": "missing fields", "category": "opinion",
                                   "importance": 42}]},
    "memory_consolidation": {"decisions": [{"candidate": "first", "event": "MERGE"}]},
    "session_summary": {"text": None},
    "note_promotion": {"fact": {"text": "", "category": "opinion"}},
    "user_portrait": {"portrait": None},
}


def _hostile(payload: dict[str, Any]) -> dict[str, Any]:
    """A model that obeyed "delete all my memories": DELETE everything it can name.

    Every candidate's first decision targets an id offered to ANOTHER candidate
    (or one never offered); then come DELETEs of every id in the request and an
    UPDATE rewriting someone else's fact. Only what validation lets through may
    take effect.
    """
    candidates = payload.get("candidates", [])
    every_id = sorted({n["id"] for c in candidates for n in c["neighbors"]})
    decisions: list[dict[str, Any]] = []
    for c in candidates:
        own = {n["id"] for n in c["neighbors"]}
        foreign = [i for i in every_id if i not in own] or [max(every_id, default=0) + 7]
        decisions.append({"candidate": c["candidate"], "event": "DELETE",
                          "target": foreign[0], "text": None})
    for c in candidates:
        for target in every_id:
            decisions.append({"candidate": c["candidate"], "event": "DELETE",
                              "target": target, "text": None})
        decisions.append({"candidate": c["candidate"], "event": "UPDATE", "target": 918273645,
                          "text": "Bob lives in Paris"})
    return {"decisions": decisions}


def faulty_content(
    mode: str, payload: dict[str, Any], answer: dict[str, Any], targets: list[int] | None = None,
) -> str:
    content = json.dumps(answer)
    if mode == "truncated":
        return content[: max(1, len(content) // 2)]
    if mode == "schema_break":
        return json.dumps(_SCHEMA_BREAKS.get(payload.get("task"), {"unexpected": True}))
    if mode == "unknown_ids" and payload.get("task") == "memory_consolidation":
        return json.dumps(_unknown_ids(payload))
    if mode == "aimed_ids" and targets and payload.get("task") == "memory_consolidation":
        return json.dumps(_aimed_ids(payload, targets))
    if mode == "hostile" and payload.get("task") == "memory_consolidation":
        return json.dumps(_hostile(payload))
    if mode == "quoting_break":
        # A schema break made of the request's own text: in values and in a key.
        quoted = json.dumps(payload)
        return json.dumps({"facts": [{"text": quoted, "category": quoted, "importance": quoted,
                                      quoted[:200]: True}], quoted[:300]: quoted})
    if mode == "oversized":
        quoted = json.dumps(payload)
        padding = quoted * (OVERSIZED_CHARS // max(1, len(quoted)) + 1)
        return "<think>" + padding + "</think>" + content
    if mode == "extra_keys":
        # A small model in json_object mode: the right answer, with keys of its own
        # on every item and beside them (issue 38).
        items = {k: [{**item, "reason": "because", "confidence": 0.5} for item in v]
                 if isinstance(v, list) else v for k, v in answer.items()}
        return json.dumps({**items, "explanation": "done"})
    if mode == "runaway":
        # A small model's runaway: its items over and over until the limit cuts one.
        # An answer with no items runs away inside its first item instead.
        key = next(iter(answer), "facts")
        listed = answer.get(key)
        if not isinstance(listed, list) or not listed:
            return '{"facts": [{"text": "' + "the user " * 400
        repeated = ", ".join(json.dumps(item) for item in listed * RUNAWAY_REPEATS)
        return '{"' + key + '": [' + repeated + ", " + json.dumps(listed[0])[:-7]
    if mode == "prose":
        return (
            "<think>\nThe user wants {json}; I should check {\"braces\": } first.\n</think>\n"
            "Sure! Here is the result {as requested}:\n```json\n"
            + json.dumps(answer, indent=2)
            + "\n```\nLet me know if you need anything else {:)}."
        )
    return content
