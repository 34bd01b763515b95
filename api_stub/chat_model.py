"""The chat stand-in's model turn: the prompt split and the memory tools, as a chat
server would use them (docs/prompt.md, docs/tools.md).

The prompt, in the order docs/prompt.md documents:

    system: PERSONA                      (fixed)
            + stable block               (the same bytes until a commit changes it)
            ------- cache boundary -------
    system: volatile block               (this turn's; left out when empty)
    the session's conversation so far, then the user's message

The tools are the shared definitions (worker/client/memory_tools.json), offered with
every request, and each tool call the model returns is run by worker.client's
``AsyncMemoryTools`` for the token's user and the turn's assistant. The executor's
``AsyncMemoryApi`` calls this very app in-process (``httpx.ASGITransport``: no socket,
no URL to configure) with the user's own bearer token, so a tool call goes through the
API's own authentication, validation, rate limits and consent, exactly as a chat
server's executor does over the network: one copy of the tools' logic, not a second
one over the store.

At most ``rounds`` rounds of tool calls a turn (MEMFLEET_CHAT_TOOL_ROUNDS), each of at
most MAX_CALLS_PER_ROUND calls (more are answered with an error, unrun); then the
model is asked once more with ``tool_choice: none`` for its answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from worker.api.settings import ApiSettings
from worker.client.memory_api_async import AsyncMemoryApi
from worker.client.memory_tools import AsyncMemoryTools
from worker.read_split import PromptBlocks

PERSONA = (
    "You are memfleet's chat stand-in, a helpful assistant. Answer briefly. When the "
    "user asks about the past, search your memory of them; when they ask you to "
    "remember or forget something, use the memory tools."
)
FALLBACK_ANSWER = "Sorry, I could not finish that."
MAX_CALLS_PER_ROUND = 8
# The in-process API's address: ASGITransport never resolves it.
IN_PROCESS_URL = "http://127.0.0.1"
_TOO_MANY = json.dumps({"ok": False, "error": "bad_arguments",
                        "message": f"at most {MAX_CALLS_PER_ROUND} tool calls at once"})


def prompt_messages(blocks: PromptBlocks, history: Sequence[dict[str, str]],
                    content: str, *, persona: str = PERSONA) -> list[dict[str, Any]]:
    """The turn's messages: persona and stable block first (the cacheable prefix), the
    volatile block after it, then the conversation and the user's message."""
    stable = persona if not blocks.stable.block else f"{persona}\n\n{blocks.stable.block}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": stable}]
    if blocks.volatile.block:
        messages.append({"role": "system", "content": blocks.volatile.block})
    messages.extend({"role": m["role"], "content": m["content"]} for m in history)
    messages.append({"role": "user", "content": content})
    return messages


def in_process_tools(app: Any, token: str, user_id: str,
                     agent_id: str | None) -> AsyncMemoryTools:
    """The memory tools for ``user_id`` (and ``agent_id``) over this app, in-process, with
    the user's own token; close ``tools.api`` after the turn."""
    api = AsyncMemoryApi(IN_PROCESS_URL, token=token, transport=httpx.ASGITransport(app=app))
    return AsyncMemoryTools(api, user_id=user_id, agent_id=agent_id)


@dataclass(frozen=True, slots=True)
class TurnAnswer:
    answer: str
    tool_calls: int  # the tool calls run this turn


class ModelUnavailable(Exception):
    """The chat model did not answer (nothing of the turn is stored)."""


class ChatModel:
    """The stand-in's model: an OpenAI-compatible endpoint, and the tool-call loop."""

    def __init__(self, base_url: str, *, api_key: str, model: str, timeout_s: float,
                 rounds: int) -> None:
        self.base_url, self.api_key, self.model = base_url, api_key, model
        self.timeout_s, self.rounds = timeout_s, rounds

    @classmethod
    def from_settings(cls, settings: ApiSettings) -> ChatModel | None:
        """None without MEMFLEET_CHAT_MODEL_BASE_URL: the stand-in's canned answer."""
        if not settings.chat_model_base_url:
            return None
        key = settings.chat_model_api_key
        return cls(settings.chat_model_base_url,
                   api_key=key.get_secret_value() if key else "unused",
                   model=settings.chat_model, timeout_s=settings.chat_model_timeout_s,
                   rounds=settings.chat_tool_rounds)

    async def answer(self, messages: list[dict[str, Any]],
                     tools: AsyncMemoryTools | None) -> TurnAnswer:
        """The model's answer to ``messages`` (appended to as the turn goes), running its
        tool calls with ``tools`` (None, or rounds 0: no tools offered)."""
        offered: dict[str, Any] = {}
        if tools is not None and self.rounds > 0:
            offered = {"tools": tools.definitions}
        ran = 0
        sent: list[Any] = messages  # the openai SDK's TypedDicts, as plain dicts
        try:
            async with openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key,
                                          timeout=self.timeout_s, max_retries=0) as client:
                for round_ in range(self.rounds + 1):
                    last = round_ == self.rounds
                    extra = {**offered, "tool_choice": "none"} if offered and last else offered
                    completion = await client.chat.completions.create(
                        model=self.model, messages=sent, **extra)
                    message = completion.choices[0].message
                    if tools is None or not offered or last or not message.tool_calls:
                        return TurnAnswer(message.content or FALLBACK_ANSWER, ran)
                    messages.append(message.model_dump(exclude_none=True))
                    for n, call in enumerate(message.tool_calls):
                        if n >= MAX_CALLS_PER_ROUND or call.type != "function":
                            result = _TOO_MANY if n >= MAX_CALLS_PER_ROUND else json.dumps(
                                {"ok": False, "error": "unknown_tool",
                                 "message": "only function tools are offered"})
                        else:
                            result = await tools.run(call.function.name,
                                                     call.function.arguments)
                            ran += 1
                        messages.append({"role": "tool", "tool_call_id": call.id,
                                         "content": result})
        except openai.OpenAIError as exc:
            raise ModelUnavailable(type(exc).__name__) from None
        return TurnAnswer(FALLBACK_ANSWER, ran)  # not reached: the last round returns
