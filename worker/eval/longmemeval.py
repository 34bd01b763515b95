"""LongMemEval's questions as `memfleet eval` scenarios (docs/eval.md, "LongMemEval").

Pure but for reading the file the user supplies (nothing is downloaded). LongMemEval
(Wu et al., 2024) asks a model questions about a long chat history; memfleet's eval is
judge-free on the end state, so an item becomes a scenario whose sessions are its
haystack (bounded: its answer sessions plus up to ``others`` other sessions, in the
haystack's order) and whose one gold assertion is that the gold answer's distinctive
words are in an active fact when the question is asked. For knowledge-update items
the answer is the final value, and it must be held by one active fact only (``once``):
a reader given the memory gets that value, not it and a stale copy. No model answers
the question: this measures recall of the answer into memory, not answering. With
`--qa`, the item's question is also asked, and answered from the known-facts block.

Only knowledge-update and temporal-reasoning items are taken; abstention items (ids
ending in ``_abs``: the answer is not in the history) and other types are skipped and
counted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worker.errors import MemfleetError
from worker.eval.suite import LONGMEMEVAL_KINDS as TYPES
from worker.eval.suite import Active, Expect, Question, Scenario, Session, Turn, Words

FIELDS: dict[str, type] = {
    "question_id": str, "question_type": str, "question": str, "answer": object,
    "question_date": str, "haystack_session_ids": list, "haystack_dates": list,
    "haystack_sessions": list, "answer_session_ids": list,
}
MAX_WORDS = 4  # distinctive words kept from an answer: a long answer is a sentence
_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?$")
_TOKEN = re.compile(r"\w+(?:[.,:/'\u2019-]\w+)*")
_STOP_WORDS = """
a an the and or but of to in on at for from by with as is are was were be been being it
its this that these those there their they them he she his her you your i my me we our
us not no yes so than then now also about into over after before up down out more most
less least very just only same any some all each both either neither one ones has have
had do does did will would can could should may might must which who whom what when
where why how per including include acceptable answer user
"""
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(slots=True)
class Loaded:
    """The scenarios made, and how many items were taken and skipped, and why."""

    scenarios: list[Scenario]
    items: int = 0
    taken: Counter[str] = field(default_factory=Counter)  # by question type
    skipped: Counter[str] = field(default_factory=Counter)  # by reason

    def line(self) -> str:
        taken = ", ".join(f"{n} {t}" for t, n in sorted(self.taken.items())) or "none"
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        return (f"longmemeval: {self.items} items, {sum(self.taken.values())} taken "
                f"({taken})" + (f"; skipped: {skipped}" if skipped else ""))

    def as_json(self) -> dict[str, Any]:
        return {"items": self.items, "taken": dict(sorted(self.taken.items())),
                "skipped": dict(sorted(self.skipped.items()))}


def parse_date(text: str) -> datetime:
    """LongMemEval's "2023/05/20 (Sat) 02:21" (UTC: the data set names no zone)."""
    match = _DATE.match(text.strip())
    if match is None:
        raise ValueError(f"not a date like '2023/05/20 (Sat) 02:21': {text!r}")
    year, month, day, hour, minute = (int(g) if g else 0 for g in match.groups())
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def distinctive_words(answer: str) -> tuple[str, ...]:
    """The answer's words that would find it in a fact: numbers, and words of three
    letters or more that are not common ones, in order, once each, at most MAX_WORDS."""
    words: list[str] = []
    for token in _TOKEN.findall(answer):
        token = token.strip(".,:/'\u2019-")
        folded = token.casefold()
        if not token or folded in _STOP or (len(token) < 3 and not token.isdigit()):
            continue
        if folded not in (w.casefold() for w in words):
            words.append(token)
    return tuple(words[:MAX_WORDS])


def _fault(index: int, item: Any) -> str | None:
    if not isinstance(item, dict):
        return f"item {index}: not an object"
    for name, kind in FIELDS.items():
        if name not in item:
            return f"item {index}: no field {name!r}"
        if not isinstance(item[name], kind):
            return f"item {index}: field {name!r} is not a {kind.__name__}"
    lengths = {len(item[n]) for n in ("haystack_session_ids", "haystack_dates",
                                      "haystack_sessions")}
    if len(lengths) != 1:
        return (f"item {index}: field 'haystack_sessions': haystack_session_ids, "
                "haystack_dates and haystack_sessions differ in length")
    return None


def _session_id(raw: object, position: int) -> str:
    text = re.sub(r"[^A-Za-z0-9_.:-]", "-", str(raw))[:60]
    return text or f"s{position}"


def _turns(raw: Any, index: int, position: int) -> tuple[Turn, ...]:
    if not isinstance(raw, list):
        raise MemfleetError(f"item {index}: field 'haystack_sessions': session {position} "
                            "is not a list of turns")
    turns = []
    for turn in raw:
        if (not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant")
                or not isinstance(turn.get("content"), str)):
            raise MemfleetError(f"item {index}: field 'haystack_sessions': session "
                                f"{position} has a turn without a role and a content")
        if turn["content"].strip():
            turns.append(Turn(role=turn["role"], content=turn["content"]))
    return tuple(turns)


def to_scenario(index: int, item: dict[str, Any], others: int) -> Scenario | None:
    """The item as a scenario, or None when its answer has no distinctive word or its
    kept sessions no user turn. A MemfleetError naming the item and field if malformed."""
    answers = {str(s) for s in item["answer_session_ids"]}
    kept, spare = [], others
    for position, raw_id in enumerate(item["haystack_session_ids"]):
        if str(raw_id) not in answers:
            if spare <= 0:
                continue
            spare -= 1
        try:
            at = parse_date(str(item["haystack_dates"][position]))
        except ValueError as exc:
            raise MemfleetError(f"item {index}: field 'haystack_dates': {exc}") from None
        turns = _turns(item["haystack_sessions"][position], index, position)
        if any(t.role == "user" for t in turns):
            kept.append(Session(id=_session_id(raw_id, position), at=at, turns=turns))
    words = distinctive_words(str(item["answer"]))
    if not kept or not words:
        return None
    kept.sort(key=lambda s: s.at)  # stable: same-moment sessions keep the haystack's order
    try:
        asked = parse_date(item["question_date"])
    except ValueError as exc:
        raise MemfleetError(f"item {index}: field 'question_date': {exc}") from None
    kind = item["question_type"]
    slug = re.sub(r"[^a-z0-9_-]", "-", str(item["question_id"]).casefold())[:56]
    scenario = Scenario(
        id=f"lme-{slug}", kind=kind, about=item["question"][:200] or kind,
        sessions=tuple(kept),
        expect=Expect(active=(Active(words=words, once=kind == "knowledge-update"),)),
        # `--qa`: the item's own question and gold answer (a judge model suits its
        # sentence-long answers better than exact match); its fact, found by the
        # answer's distinctive words as the assertion finds it.
        questions=(Question(ask=item["question"] or kind, answer=str(item["answer"]),
                            fact=Words(words=words)),),
    )
    # Read when the question is asked, if that is after the last session (as it is).
    if asked > scenario.ends_at:
        scenario = scenario.model_copy(update={"end_at": asked})
    return scenario


def convert(raw: Any, *, limit: int | None, others: int) -> Loaded:
    """LongMemEval's items (the parsed file) as scenarios: at most ``limit`` items taken."""
    if not isinstance(raw, list):
        raise MemfleetError("not a JSON list of LongMemEval items")
    loaded = Loaded([], items=len(raw))
    seen: set[str] = set()
    for index, item in enumerate(raw):
        fault = _fault(index, item)
        if fault is not None:
            raise MemfleetError(fault)
        kind, qid = item["question_type"], item["question_id"]
        if qid.endswith("_abs"):
            loaded.skipped["abstention"] += 1
        elif kind not in TYPES:
            loaded.skipped[kind] += 1
        elif limit is not None and sum(loaded.taken.values()) >= limit:
            loaded.skipped["over --longmemeval-limit"] += 1
        else:
            scenario = to_scenario(index, item, others)
            if scenario is None or scenario.id in seen:
                loaded.skipped["no answer words or user turn" if scenario is None
                               else "duplicate id"] += 1
                continue
            seen.add(scenario.id)
            loaded.scenarios.append(scenario)
            loaded.taken[kind] += 1
    return loaded


def load_longmemeval(path: Path, *, limit: int | None, others: int) -> Loaded:
    """The file's items as scenarios; a MemfleetError in one line when it is not
    LongMemEval's format (naming the item's index and the field)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise MemfleetError(f"--longmemeval {path}: {exc}") from None
    except ValueError as exc:
        raise MemfleetError(f"--longmemeval {path}: not JSON: {exc}") from None
    try:
        return convert(raw, limit=limit, others=others)
    except MemfleetError as exc:
        raise MemfleetError(f"--longmemeval {path}: {exc}") from None
