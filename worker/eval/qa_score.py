"""`memfleet eval --qa`'s scoring: an answer against a question's gold, and the tallies.

Pure. Exact match is on normalised words: both texts are cased alike (NFKC, casefold)
and cut into words, punctuation dropped; the answer is right when the gold's words
(or those of one of its ``also`` alternatives) occur in it as a run of whole words
("Madrid" in "The user lives in Madrid.", not "Jo" in "Joey"), and none of the
question's ``wrong`` values does (an answer naming the old city beside the new one
does not know which holds). A date question's gold is YYYY, YYYY-MM or YYYY-MM-DD:
the answer is right when it holds a date, in ISO or as written ("17 March 2054",
"March 17, 2054", "February 2054"), that agrees with the gold to the gold's
precision. docs/eval.md, "Question answering".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from worker.eval.suite import KINDS, Question

_WORD = re.compile(r"\w+")
_MONTHS = {name: number for number, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
    ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
    ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec")), start=1) for name in names}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:1[89]|2\d)\d{2})"
_ISO = re.compile(r"(?<!\d)" + _YEAR + r"-(\d{1,2})(?:-(\d{1,2}))?(?!\d)")
_DAY_MONTH_YEAR = re.compile(r"(?<!\w)" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR)
_MONTH_DAY_YEAR = re.compile(r"(?<!\w)" + _MONTH + r"\s+" + _DAY + r",?\s+" + _YEAR)
_MONTH_YEAR = re.compile(r"(?<!\w)" + _MONTH + r",?\s+(?:of\s+)?" + _YEAR)
_BARE_YEAR = re.compile(r"(?<![\d-])" + _YEAR + r"(?![\d-])")

DateParts = tuple[int, int | None, int | None]  # year, month, day; None: not said


def words(text: str) -> list[str]:
    """The text's words, cased alike (NFKC, casefold); punctuation is not a word."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def _has_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    return n > 0 and any(list(haystack[i:i + n]) == list(needle)
                         for i in range(len(haystack) - n + 1))


def says(answer: str, gold: str) -> bool:
    """Whether the answer holds the gold's words as a run of whole words."""
    return _has_run(words(answer), words(gold))


def dates_in(text: str) -> set[DateParts]:
    """Every date the text gives, in ISO or as written; a bare year counts as a year."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found: set[DateParts] = set()
    for m in _ISO.finditer(folded):
        found.add((int(m[1]), int(m[2]), int(m[3]) if m[3] else None))
    for m in _DAY_MONTH_YEAR.finditer(folded):
        found.add((int(m[3]), _MONTHS[m[2]], int(m[1])))
    for m in _MONTH_DAY_YEAR.finditer(folded):
        found.add((int(m[3]), _MONTHS[m[1]], int(m[2])))
    for m in _MONTH_YEAR.finditer(folded):
        found.add((int(m[2]), _MONTHS[m[1]], None))
    for m in _BARE_YEAR.finditer(folded):
        found.add((int(m[1]), None, None))
    return found


def gold_date(text: str) -> DateParts:
    """A gold date, YYYY, YYYY-MM or YYYY-MM-DD (worker.eval.suite checked its shape)."""
    parts = [int(p) for p in text.split("-")]
    return parts[0], parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None


def _agrees(found: DateParts, gold: DateParts) -> bool:
    return all(g is None or f == g for f, g in zip(found, gold, strict=True))


def exact_match(question: Question, answer: str) -> bool:
    """The answer is right by exact match (the module docstring says how)."""
    if any(says(answer, wrong) for wrong in question.wrong):
        return False
    if question.match == "date":
        gold = gold_date(question.answer)
        return any(_agrees(found, gold) for found in dates_in(answer))
    return any(says(answer, gold) for gold in (question.answer, *question.also))


@dataclass(frozen=True, slots=True)
class QuestionScore:
    """One question asked: what was answered, and how it scored."""

    scenario: str
    kind: str
    ask: str
    gold: str
    answer: str
    exact: bool  # right by exact match
    judged: bool | None = None  # the judge model's verdict; None: no judge
    facts: int = 0  # facts in the known-facts block it was answered from
    # Where the gold fact ranked in the search for the question (1: first); None: not
    # among the hits, or retrieval was not measured.
    rank: int | None = None
    # Its rank by meaning alone (the embedder's own list, before the words' list is
    # fused with it): what tells two embedders apart.
    semantic_rank: int | None = None
    # Its rank in the same hits re-ranked as the prompt split's volatile block ranks
    # them (--rerank); None: not among the hits, or not measured.
    reranked_rank: int | None = None

    @property
    def right(self) -> bool:
        """The judge's verdict when there is one, else exact match's."""
        return self.exact if self.judged is None else self.judged


@dataclass(slots=True)
class QaKindScore:
    """A kind's questions summed (or every kind's: the totals)."""

    kind: str
    questions: int = 0
    exact: int = 0
    judged: int = 0
    judged_questions: int = 0
    at_1: int = 0  # the gold fact ranked first in the search for the question
    at_k: int = 0  # the gold fact within the first RETRIEVAL_K
    semantic_at_1: int = 0  # the gold fact first by meaning alone
    reranked_at_1: int = 0  # first in the re-ranked hits (--rerank)
    reranked_at_k: int = 0  # within the first RETRIEVAL_K of them
    facts: int = 0  # facts in the blocks the questions were answered from, summed

    def add(self, score: QuestionScore, k: int) -> None:
        self.questions += 1
        self.exact += score.exact
        if score.judged is not None:
            self.judged_questions += 1
            self.judged += score.judged
        self.at_1 += score.rank == 1
        self.at_k += score.rank is not None and score.rank <= k
        self.semantic_at_1 += score.semantic_rank == 1
        self.reranked_at_1 += score.reranked_rank == 1
        self.reranked_at_k += score.reranked_rank is not None and score.reranked_rank <= k
        self.facts += score.facts

    @property
    def right(self) -> int:
        return self.judged if self.judged_questions else self.exact


def qa_by_kind(scores: Iterable[QuestionScore], k: int) -> tuple[list[QaKindScore], QaKindScore]:
    """Per kind, in KINDS' order (kinds without questions left out), and the totals."""
    kinds = {kind: QaKindScore(kind) for kind in KINDS}
    total = QaKindScore("total")
    for score in scores:
        kinds.setdefault(score.kind, QaKindScore(score.kind)).add(score, k)
        total.add(score, k)
    return [q for q in kinds.values() if q.questions], total
