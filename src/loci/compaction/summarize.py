"""The summarizer seam of stage 2: the offline extractive default, or any chat model
with a customizable prompt (the compaction prompt and the summary's sections)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from loci.llm.base import ChatModel
from loci.models import Event, shared, speaker
from loci.store.rows import call_text

COMPACTION_PROMPT = """Summarize the conversation history below so the conversation can \
continue without it. Use these sections, skipping empty ones:
Files (read and edited), Edits (file and what changed), Errors (verbatim), Commands \
(each with its outcome: exit code, error or result line), Completed work, Current \
state, In-progress tasks, Next steps, Constraints, Critical context, Decisions, Action \
items, Insights, Preferences, Facts (events, possessions, relationships, plans, likes).
Keep names, numbers, identifiers, paths, commands and dates exactly as written; say who \
said or did each thing and when, as "- [8 May 2023] Name: fact" with the day written where \
it changes. A newer statement about the same thing replaces the \
older one. Merge the summary of the earlier conversation in, keeping its facts and its \
sections. End with lookup hints: words to search the archived history for details.
Do NOT include routine greetings or small talk, boilerplate instructions, or redundant \
information."""


class Summarizer(Protocol):
    def summarize(
        self,
        events: Sequence[Event],
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = 800,
    ) -> str: ...


def transcript_line(event: Event) -> str:
    """One event as the summarizing model reads it: who, when, and what (a tool call
    with its arguments)."""
    who = speaker(event.metadata) or event.role
    head = f"[{event.timestamp:%Y-%m-%d %H:%M}] {who}"
    if event.type == "tool_call":
        return f"{head}: {call_text(event.content, event.tool_name, event.args)}"
    tool = f" ({event.tool_name})" if event.tool_name else ""
    return f"{head}{tool}: {event.content}{shared(event.metadata)}"


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
        lines = [transcript_line(e) for e in events if e.content or e.type == "tool_call"]
        parts.append("Conversation:\n" + "\n".join(lines))
        reply = self.model.complete(
            [{"role": "system", "content": system},
             {"role": "user", "content": "\n\n".join(parts)}],
            max_tokens=max_tokens,
        )
        return reply.content.strip()
