"""The summarizer seam of stage 2: the offline extractive default, or any chat model
with a customizable prompt (seeds/003's compaction prompt, seeds/004's structure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from loci.llm.base import ChatModel
from loci.models import Event

COMPACTION_PROMPT = """Summarize the conversation history below so the conversation can \
continue without it. Use these sections, skipping empty ones:
Completed work, Current state, In-progress tasks, Next steps, Constraints, Critical \
context, Decisions, Action items, Insights, Preferences.
Keep names, numbers, identifiers, paths and dates exactly as written.
Do NOT include routine greetings or small talk, step-by-step tool execution details, or \
redundant information."""


class Summarizer(Protocol):
    def summarize(
        self,
        events: Sequence[Event],
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = 800,
    ) -> str: ...


class ChatSummarizer:
    """Stage-2 summaries written by a chat model."""

    def __init__(self, model: ChatModel, prompt: str = COMPACTION_PROMPT) -> None:
        self.model = model
        self.prompt = prompt

    def summarize(
        self,
        events: Sequence[Event],
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = 800,
    ) -> str:
        system = self.prompt
        if instructions:
            system += f"\n\nAdditional instructions: {instructions}"
        parts = []
        if previous_summary:
            parts.append(f"Summary of the conversation before this part (fold it in):\n"
                         f"{previous_summary}")
        lines = [f"{e.role}{f' ({e.tool_name})' if e.tool_name else ''}: {e.content}"
                 for e in events if e.content]
        parts.append("Conversation:\n" + "\n".join(lines))
        reply = self.model.complete(
            [{"role": "system", "content": system},
             {"role": "user", "content": "\n\n".join(parts)}],
            max_tokens=max_tokens,
        )
        return reply.content.strip()
