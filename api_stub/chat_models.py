"""Request and response bodies of the chat stand-in."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from worker.api.fields import MAX_CONTENT_CHARS, AgentId, CleanText

HandoverOutcome = Literal["scheduled", "unavailable", "refused"]


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: CleanText = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    agent_id: AgentId | None = Field(
        default=None, description="The assistant (persona) the user talks with: memory "
                                  "reads its relationship facts and keeps new ones with it.")


class ChatReply(BaseModel):
    session_id: str
    answer: str
    handover: HandoverOutcome = Field(
        description="What became of the memory hand-over; the answer never waits for memory."
    )
    known_facts: int = Field(description="Facts the stand-in put in its prompt for this turn "
                                         "(the stable block's and the volatile block's).")
    tool_calls: int = Field(default=0, description="Memory tool calls the model made and the "
                                                   "stand-in ran this turn.")
