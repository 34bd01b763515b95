"""`memfleet eval --qa` and `--retrieval`'s report: the table per kind and the JSON.

Pure: the questions' scores (worker.eval.qa_score) and what they were measured
with in, text and dicts out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worker.eval.qa import RETRIEVAL_K
from worker.eval.qa_score import QaKindScore, QuestionScore, qa_by_kind
from worker.eval.qa_wire import QA_PROMPT_VERSION


@dataclass(frozen=True, slots=True)
class QaInfo:
    """What the answers and the ranks were measured with."""

    answered: bool  # --qa: the answer model answered
    retrieval: bool  # --retrieval: the gold fact's rank in the search
    answer_model: str
    judge_model: str | None  # None: exact match only
    read_top_k: int  # MEMFLEET_READ_TOP_K: the chat server's read
    embeddings: str  # what the search ranked with
    control: str | None = None  # "empty-read": answered from an empty block
    # --rerank: the re-ranking's weights, as a line (None: not measured)
    rerank: str | None = None
    prompt_version: str = QA_PROMPT_VERSION

    def line(self) -> str:
        parts = []
        if self.answered:
            read = ("an empty known-facts block (control: empty-read)" if self.control
                    else f"the known-facts block (read top-k {self.read_top_k})")
            judge = (f"; judge {self.judge_model} (the 'right' column), exact match beside it"
                     if self.judge_model else "; scored by exact match")
            parts.append(f"answered by {self.answer_model} from {read}{judge}; "
                         f"qa prompt {self.prompt_version}")
        if self.retrieval:
            parts.append(f"retrieval: the gold fact's rank in the search, embeddings "
                         f"{self.embeddings}")
        if self.retrieval and self.rerank:
            parts.append(f"reranked: the same hits in the prompt split's volatile order "
                         f"({self.rerank})")
        return "; ".join(parts)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _columns(info: QaInfo) -> tuple[str, ...]:
    head = ["kind", "questions"]
    if info.answered:
        head += ["exact", "exact %"]
        if info.judge_model:
            head += ["right", "right %"]
    if info.retrieval:
        head += ["gold@1", f"gold@{RETRIEVAL_K}", "meaning@1"]
        if info.rerank:
            head += ["reranked@1", f"reranked@{RETRIEVAL_K}"]
    return tuple(head)


def _row(k: QaKindScore, info: QaInfo) -> tuple[str, ...]:
    row = [k.kind, str(k.questions)]
    if info.answered:
        row += [f"{k.exact}/{k.questions}", _percent(k.exact, k.questions)]
        if info.judge_model:
            row += [f"{k.judged}/{k.judged_questions}", _percent(k.judged, k.judged_questions)]
    if info.retrieval:
        row += [f"{k.at_1}/{k.questions}", f"{k.at_k}/{k.questions}",
                f"{k.semantic_at_1}/{k.questions}"]
        if info.rerank:
            row += [f"{k.reranked_at_1}/{k.questions}", f"{k.reranked_at_k}/{k.questions}"]
    return tuple(row)


def qa_table(answers: Sequence[QuestionScore], info: QaInfo, *, details: bool = True) -> str:
    """The questions per kind and the totals; ``details``: every wrong answer."""
    kinds, total = qa_by_kind(answers, RETRIEVAL_K)
    head = _columns(info)
    rows = [head, *(_row(k, info) for k in kinds), _row(total, info)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    mean = f"{total.facts / total.questions:.1f}" if total.questions else "0"
    out = [f"questions: {len(answers)}; {info.line()}",
           f"facts in a question's known-facts block: {mean} on average", "",
           *(line(r) for r in rows)]
    wrong = [a for a in answers if info.answered and not a.right]
    if details and wrong:
        out += ["", "answered wrong:"]
        out += [f"  {a.scenario}: {a.ask} -> {a.answer!r} (gold {a.gold!r})" for a in wrong]
    missed = [a for a in answers if info.retrieval and a.rank is None]
    if details and missed:
        out += ["", "gold fact not found by the search:"]
        out += [f"  {a.scenario}: {a.ask}" for a in missed]
    return "\n".join(out)


def _fraction(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


def _kind_json(k: QaKindScore, info: QaInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": k.kind, "questions": k.questions}
    if info.answered:
        out |= {"exact": k.exact, "exact_accuracy": _fraction(k.exact, k.questions)}
        if info.judge_model:
            out |= {"judged": k.judged,
                    "judged_accuracy": _fraction(k.judged, k.judged_questions)}
    if info.retrieval:
        out |= {"gold_at_1": k.at_1, f"gold_at_{RETRIEVAL_K}": k.at_k,
                "gold_by_meaning_at_1": k.semantic_at_1}
        if info.rerank:
            out |= {"reranked_gold_at_1": k.reranked_at_1,
                    f"reranked_gold_at_{RETRIEVAL_K}": k.reranked_at_k}
    return out


def qa_json(answers: Sequence[QuestionScore], info: QaInfo) -> dict[str, Any]:
    kinds, total = qa_by_kind(answers, RETRIEVAL_K)
    return {
        "answered": info.answered,
        "answer_model": info.answer_model if info.answered else None,
        "judge_model": info.judge_model if info.answered else None,
        "qa_prompt_version": info.prompt_version,
        "read_top_k": info.read_top_k,
        "control": info.control,
        "retrieval": info.retrieval,
        "retrieval_embeddings": info.embeddings if info.retrieval else None,
        "rerank": info.rerank if info.retrieval else None,
        "kinds": [_kind_json(k, info) for k in kinds],
        "total": _kind_json(total, info),
        "questions": [{"scenario": a.scenario, "kind": a.kind, "ask": a.ask, "gold": a.gold,
                       "answer": a.answer if info.answered else None,
                       "exact": a.exact if info.answered else None, "judged": a.judged,
                       "facts": a.facts, "rank": a.rank, "semantic_rank": a.semantic_rank,
                       "reranked_rank": a.reranked_rank}
                      for a in answers],
    }
