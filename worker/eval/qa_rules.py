"""The offline rules for question answering (`memfleet eval --qa` with
MEMFLEET_LLM_PROVIDER=rules, and the LLM stub's answer and judge modes).

A stand-in, not a reader: it understands no sentence. What it does, and all it does:

- answer: each line of the known-facts block is a fact; the fact sharing the most
  words with the question wins (words compared by a crude stem: "lives" and "live",
  "uses" and "using" agree; question words and fillers do not count). No shared
  word: "unknown". Several facts tied for best: it cannot tell which holds, so it
  names each one's value, joined by " or " (an exact match then fails on a ``wrong``
  value, as it should for a reader that cannot choose). A fact's value is its words
  that the question does not already say, cut before "instead" or "than" (what
  it replaced); for a question about a time ("when", a date, a month, a year), the
  value is the fact's own words if they hold a number or a month, else the date the
  block gives the line: when it became true ("since") if the block says, else when
  it was last said.
- judge: correct when every word of the reference occurs in the answer (cased
  alike, punctuation dropped), and the answer names one candidate only (no " or ").
"""

from __future__ import annotations

import re
import unicodedata

from worker.eval.qa_wire import (
    MAX_ANSWER_CHARS,
    UNKNOWN,
    AnswerRequest,
    JudgeRequest,
    JudgeVerdict,
    QuestionAnswer,
)
from worker.providers.base import Answer, Usage
from worker.providers.rules import MODEL as RULES_MODEL

_WORD = re.compile(r"\w+")
_LINE = re.compile(r"^- (?:\[[^\]]*\] )?(?P<text>.*?)"
                   r"(?: \((?:since (?P<since>\d{4}-\d{2}-\d{2}); said )?"
                   r"(?P<date>\d{4}-\d{2}-\d{2})\))?$")
_STOP_WORDS = """
a an the and or but of to in on at for from by with as is are was were be been being it its
this that these those what which who whom whose where when why how do does did has have had
user user's users s his her hers he she they them their theirs i me my you your we our
called call any some one ones now there here about into then so
"""
_STOP = frozenset(_STOP_WORDS.split())
_TIME_WORDS = frozenset({"when", "date", "day", "month", "year", "since"})
_MONTHS = """january february march april may june july august september october november
december jan feb mar apr jun jul aug sep sept oct nov dec"""
_MONTH_WORDS = frozenset(_MONTHS.split())
_CUT = frozenset({"instead", "than"})
_SUFFIXES = ("ing", "es", "ed", "s")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def stem(word: str) -> str:
    """A crude stem: one suffix off, then a final "e" ("uses", "using", "use": "us")."""
    word = _fold(word)
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 2 else word


def _content(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if _fold(w) not in _STOP]


def _value(text: str, line_date: str | None, asked: set[str], about_time: bool) -> str:
    said = []
    for word in _content(text):
        if _fold(word) in _CUT:
            break
        if stem(word) not in asked:
            said.append(word)
    if about_time and not any(w.isdigit() or _fold(w) in _MONTH_WORDS for w in said):
        return line_date or ""
    return " ".join(said)


def answer_question(request: AnswerRequest) -> QuestionAnswer:
    """The rules' answer (the module docstring says how it is found)."""
    question = [_fold(w) for w in _WORD.findall(request.question)]
    asked = {stem(w) for w in question if w not in _STOP}
    about_time = bool(_TIME_WORDS & set(question))
    best, tied = 0, []
    for raw in request.known_facts.splitlines():
        line = _LINE.match(raw.strip())
        if line is None:
            continue  # the header, or not a fact line
        shared = len(asked & {stem(w) for w in _content(line["text"])})
        if shared > best:
            best, tied = shared, [line]
        elif shared == best and shared:
            tied.append(line)
    values: list[str] = []
    for line in tied:
        value = _value(line["text"], line["since"] or line["date"], asked, about_time)
        if value and _fold(value) not in {_fold(v) for v in values}:
            values.append(value)
    # A value is a fact's words, up to a fact's 1000 characters: joined, cut to fit.
    return QuestionAnswer(answer=" or ".join(values)[:MAX_ANSWER_CHARS] if values else UNKNOWN)


def judge_answer(request: JudgeRequest) -> JudgeVerdict:
    """The rules' verdict: the reference's words all in the answer, one candidate only."""
    answer = {_fold(w) for w in _WORD.findall(request.answer)}
    reference = {_fold(w) for w in _WORD.findall(request.reference)}
    one = " or " not in _fold(request.answer) and _fold(request.answer).strip() != UNKNOWN
    return JudgeVerdict(correct=bool(reference) and reference <= answer and one)


class RulesAnswerer:
    provider_name = "rules"
    model = RULES_MODEL

    async def answer(self, request: AnswerRequest) -> Answer[QuestionAnswer]:
        return Answer(answer_question(request), Usage(), RULES_MODEL)


class RulesJudge:
    provider_name = "rules"
    model = RULES_MODEL

    async def judge(self, request: JudgeRequest) -> Answer[JudgeVerdict]:
        return Answer(judge_answer(request), Usage(), RULES_MODEL)
