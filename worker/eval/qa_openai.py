"""Question answering over an OpenAI-compatible endpoint (`memfleet eval --qa`): the
answer model and the judge model, on the pipeline's chat plumbing (worker.providers.
openai_chat: its client, retries, budget, schema and answer checks), and the builder
that picks them, or the offline rules, from the settings."""

from __future__ import annotations

from worker.config import Settings
from worker.eval.qa_rules import RulesAnswerer, RulesJudge
from worker.eval.qa_wire import (
    ANSWER_PROMPT,
    JUDGE_PROMPT,
    Answerer,
    AnswerRequest,
    Judge,
    JudgeRequest,
    JudgeVerdict,
    QuestionAnswer,
)
from worker.providers.base import Answer
from worker.providers.factory import chat_options
from worker.providers.openai_chat import ChatPass, OpenAIChat

_ANSWER = ChatPass("memory_question", ANSWER_PROMPT, QuestionAnswer)
_JUDGE = ChatPass("answer_judgement", JUDGE_PROMPT, JudgeVerdict)


class OpenAIAnswerer(OpenAIChat):
    async def answer(self, request: AnswerRequest) -> Answer[QuestionAnswer]:
        return await self._ask(_ANSWER, request)


class OpenAIJudge(OpenAIChat):
    async def judge(self, request: JudgeRequest) -> Answer[JudgeVerdict]:
        return await self._ask(_JUDGE, request)


def answer_model(settings: Settings) -> str:
    """The model that answers: MEMFLEET_EVAL_ANSWER_MODEL, else the extraction model."""
    return settings.eval_answer_model or settings.extract_model


def build_qa(settings: Settings) -> tuple[Answerer, Judge | None]:
    """The answerer and the judge (None: no MEMFLEET_EVAL_JUDGE_MODEL, exact match only)
    of the settings' chat provider; close them with ``aclose`` when they have one."""
    judge_model = settings.eval_judge_model
    if settings.llm_provider == "rules":
        return RulesAnswerer(), RulesJudge() if judge_model else None
    # Both checked before either client exists.
    options = chat_options(settings, answer_model(settings), "answers")
    judge_options = None if not judge_model else chat_options(settings, judge_model, "judging")
    answerer = OpenAIAnswerer(options)
    return answerer, None if judge_options is None else OpenAIJudge(judge_options)
