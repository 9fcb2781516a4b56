"""Loci as the memory of Google ADK agents: ``LociMemoryService`` implements the
``google-adk`` package's ``BaseMemoryService`` over a Loci runtime.

ADK's ``app_name`` is the Loci agent and its ``user_id`` the Loci user, so each app's
users keep their own memory. An ADK session becomes the Loci session of the same id:
its events with text become messages (the user's, or the agent's under its name), its
function calls and responses tool calls and results, each once however often the
session is added (ADK adds a session many times while it runs). ``search_memory`` is
Loci's hybrid search over the user's remembered facts and conversations;
``add_memory`` remembers facts; ``delete_memory`` forgets a fact. Needs the
``google-adk`` package (``pip install ".[adk]"``)::

    runner = Runner(agent=agent, app_name="helper", session_service=sessions,
                    memory_service=LociMemoryService(Runtime(load_settings())))
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from anyio.to_thread import run_sync
from google.adk.events.event import Event as AdkEvent
from google.adk.memory import BaseMemoryService
from google.adk.memory.base_memory_service import SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from loci import Loci, NotFoundError, Runtime
from loci.timeutil import format_timestamp

#: Where a recorded event keeps the id of the ADK event it came from.
ADK_ID = "adk_event_id"
_SEARCH_LIMIT = 10
_DELTA_SESSION = "adk"


class LociMemoryService(BaseMemoryService):
    """ADK's memory service kept by Loci (see the module's docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _loci(self, app_name: str, user_id: str) -> Loci:
        return self.runtime.scope(user_id, app_name)

    async def add_session_to_memory(self, session: Session) -> None:
        await run_sync(self._add, self._loci(session.app_name, session.user_id),
                       session.id, list(session.events))

    async def add_events_to_memory(
        self, *, app_name: str, user_id: str, events: Sequence[AdkEvent],
        session_id: str | None = None, custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await run_sync(self._add, self._loci(app_name, user_id),
                       session_id or _DELTA_SESSION, list(events))

    async def add_memory(
        self, *, app_name: str, user_id: str, memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Remember each entry's text (``custom_metadata["type"]``: its memory type)."""
        kind = str((custom_metadata or {}).get("type") or "project_context")
        texts = [text for entry in memories if (text := _text(entry.content))]
        await run_sync(self._remember, self._loci(app_name, user_id), texts, kind)

    async def search_memory(self, *, app_name: str, user_id: str,
                            query: str) -> SearchMemoryResponse:
        """The facts and conversation turns that best match ``query``, facts first."""
        return await run_sync(self._search, self._loci(app_name, user_id), query)

    async def delete_memory(self, *, app_name: str, user_id: str,
                            memory_id: str | None = None) -> None:
        """Forget a remembered fact; conversation turns are erased with their session."""
        if not memory_id:
            return
        loci = self._loci(app_name, user_id)
        if memory_id.startswith("event:"):
            raise NotImplementedError("a conversation turn is erased with its session "
                                      "(Loci.erase_session)")
        with suppress(NotFoundError):  # already gone: deleting is idempotent, as in ADK
            await run_sync(loci.forget, memory_id)

    @staticmethod
    def _remember(loci: Loci, texts: list[str], kind: str) -> None:
        for text in texts:
            loci.remember(text, type=kind)

    def _add(self, loci: Loci, session: str, events: list[AdkEvent]) -> None:
        try:
            seen = {e.metadata.get(ADK_ID) for e in loci.events(session)}
        except NotFoundError:
            seen = set()
        new = [event for event in _events(events) if event["metadata"][ADK_ID] not in seen]
        if new:
            loci.add_events(session, new)

    def _search(self, loci: Loci, query: str) -> SearchMemoryResponse:
        found = [MemoryEntry(id=hit.id, author="memory", timestamp=None,
                             content=types.Content(role="user", parts=[
                                 types.Part(text=hit.text)]))
                 for hit in loci.search(query, limit=_SEARCH_LIMIT)]
        for hit in loci.search_conversation(query, limit=_SEARCH_LIMIT):
            if len(found) >= _SEARCH_LIMIT:
                break
            role = hit.metadata.get("role")
            found.append(MemoryEntry(
                id=f"event:{hit.id}", author=str(hit.metadata.get("name") or role or ""),
                timestamp=format_timestamp(hit.timestamp),
                content=types.Content(role="model" if role == "assistant" else "user",
                                      parts=[types.Part(text=hit.text)])))
        return SearchMemoryResponse(memories=found)


def _events(events: Sequence[AdkEvent]) -> list[dict[str, Any]]:
    """Loci events for ADK events: text as messages, function calls and responses as
    tool calls and results, each tagged with the ADK event's id."""
    out: list[dict[str, Any]] = []
    for event in events:
        parts = event.content.parts if event.content and event.content.parts else []
        user = event.author == "user"
        base = {"timestamp": datetime.fromtimestamp(event.timestamp, UTC),
                "metadata": {ADK_ID: event.id, **({} if user else {"name": event.author})}}
        if text := _text(event.content):
            out.append({**base, "type": "message",
                        "role": "user" if user else "assistant", "content": text})
        for n, part in enumerate(parts):
            part_id = {**base, "metadata": {ADK_ID: f"{event.id}/{n}"}}
            if part.function_call and part.function_call.name:
                out.append({**part_id, "type": "tool_call", "role": "assistant",
                            "tool_name": part.function_call.name,
                            "tool_call_id": part.function_call.id or f"{event.id}/{n}",
                            "args": dict(part.function_call.args or {})})
            elif part.function_response and part.function_response.name:
                out.append({**part_id, "type": "tool_result", "role": "tool",
                            "tool_call_id": part.function_response.id or "",
                            "content": json.dumps(part.function_response.response or {},
                                                  ensure_ascii=False, default=str)})
    return out


def _text(content: types.Content | None) -> str:
    parts = content.parts if content and content.parts else []
    return "\n".join(p.text for p in parts if p.text and not p.thought)

