"""Loci as the memory of Google ADK agents: ``LociMemoryService`` implements the
``google-adk`` package's ``BaseMemoryService`` over a Loci runtime.

ADK's ``app_name`` is the Loci agent and its ``user_id`` the Loci user, so each app's
users keep their own memory. An ADK session becomes the Loci session of the same id:
its events with text become messages (the user's, or the agent's under its name), its
function calls and responses tool calls and results, each once however often the
session is added (ADK adds a session many times while it runs, and may add it from
several tasks, threads or processes at once). An event Loci cannot take as it came is
repaired or left out, never the whole session with it: text with an unpaired surrogate
(a character split by a broken decoder) keeps the rest of its text, the lone half
becoming U+FFFD; a timestamp no date can hold (NaN, year 31690708) becomes the time the
event is recorded; an event Loci still refuses (tool arguments that are no JSON) is left
out, with a warning naming it and why.

``search_memory`` is Loci's hybrid search over the user's remembered facts and
conversations; ``add_memory`` remembers facts; ``delete_memory`` forgets a fact. Needs
the ``google-adk`` package (``pip install ".[adk]"``)::

    runner = Runner(agent=agent, app_name="helper", session_service=sessions,
                    memory_service=LociMemoryService(Runtime(load_settings())))
"""

from __future__ import annotations

import json
import logging
import math
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

from loci import Loci, NotFoundError, Runtime, ValidationError
from loci.checks import MAX_DEPTH, check_name
from loci.timeutil import check_time, format_timestamp

#: Where a recorded event keeps the id of the ADK event it came from.
ADK_ID = "adk_event_id"
_SEARCH_LIMIT = 10
_DELTA_SESSION = "adk"
#: How deep a repair goes into an event: its JSON (an event's args or metadata, two
#: levels down) as deep as Loci stores it; what is deeper Loci refuses anyway.
_REPAIR_DEPTH = MAX_DEPTH + 2
log = logging.getLogger(__name__)


class LociMemoryService(BaseMemoryService):
    """ADK's memory service kept by Loci (see the module's docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        # The ADK ids of events Loci refused, by (user, app, session): ADK adds a
        # session on every turn, and each add would try them again and warn again.
        self._refused: dict[tuple[str, str, str], set[str]] = {}

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
        """Remember each entry's text (``custom_metadata["type"]``: its memory type),
        repaired as an event's is (``_valid_text``): one bad entry must not leave the
        entries after it unsaved."""
        kind = str((custom_metadata or {}).get("type") or "project_context")
        texts = [_valid_text(text) for entry in memories
                 if (text := _text(entry.content)).strip()]
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
        check_name("session", session)  # a bad name is the caller's, not an event's
        new = self._unseen(loci, session, _events(events))
        if not new:  # the common case (ADK adds a session on every turn): no lock
            return
        # Read again and append under the scope's lock, in every process: two adds
        # that both read before either wrote would both append every event.
        with loci.store.saving(loci.scope):
            new = self._unseen(loci, session, new)
            if new:
                self._append(loci, session, [_repaired(event) for event in new])

    def _unseen(self, loci: Loci, session: str, events: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
        """``events`` but those the session holds, repeats and those refused before."""
        try:
            seen = {e.metadata.get(ADK_ID) for e in loci.events(session)}
        except NotFoundError:
            seen = set()
        seen |= self._refused.get((loci.scope.tenant, loci.scope.agent, session), set())
        new = []
        for event in events:
            key = event["metadata"][ADK_ID]
            if key not in seen:
                seen.add(key)
                new.append(event)
        return new

    def _append(self, loci: Loci, session: str, events: list[dict[str, Any]]) -> None:
        try:
            loci.add_events(session, events)
        except ValidationError:
            # One event Loci refuses must not keep the others out (this session's
            # later events too, on every later add): each goes alone.
            for event in events:
                try:
                    loci.add_events(session, [event])
                except ValidationError as exc:
                    key = event["metadata"][ADK_ID]
                    self._refused.setdefault(
                        (loci.scope.tenant, loci.scope.agent, session), set()).add(key)
                    log.warning("ADK event %s of session %r not recorded: %s",
                                key, session, exc)

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
    # Calls without a result yet, by name: Gemini pairs a response with its call by
    # name, and ADK events may carry no ids.
    waiting: dict[str, list[str]] = {}
    for event in events:
        parts = event.content.parts if event.content and event.content.parts else []
        user = event.author == "user"
        key = _valid_text(event.id)  # as stored, or it would never be seen again
        base = {**_timestamp(event.timestamp),
                "metadata": {ADK_ID: key, **({} if user else {"name": event.author})}}
        if text := _text(event.content):
            out.append({**base, "type": "message",
                        "role": "user" if user else "assistant", "content": text})
        for n, part in enumerate(parts):
            part_id = {**base, "metadata": {ADK_ID: f"{key}/{n}"}}
            if part.function_call and part.function_call.name:
                call_id = part.function_call.id or f"{key}/{n}"
                waiting.setdefault(part.function_call.name, []).append(call_id)
                out.append({**part_id, "type": "tool_call", "role": "assistant",
                            "tool_name": part.function_call.name, "tool_call_id": call_id,
                            "args": dict(part.function_call.args or {})})
            elif part.function_response and part.function_response.name:
                named = waiting.get(part.function_response.name) or []
                call_id = part.function_response.id or (named[0] if named else "")
                if call_id in named:
                    named.remove(call_id)
                out.append({**part_id, "type": "tool_result", "role": "tool",
                            "tool_call_id": call_id,
                            "content": json.dumps(part.function_response.response or {},
                                                  ensure_ascii=False, default=str)})
    return out


def _text(content: types.Content | None) -> str:
    parts = content.parts if content and content.parts else []
    return "\n".join(p.text for p in parts if p.text and not p.thought)


def _timestamp(seconds: float) -> dict[str, datetime]:
    """The ``timestamp`` field for an ADK event's time; none (Loci stamps the event when
    it records it) for a time Loci cannot hold (``timeutil.check_time``): NaN, infinite,
    in year 0 or 10000 and beyond."""
    if not math.isfinite(seconds):
        return {}
    try:
        return {"timestamp": check_time("timestamp", datetime.fromtimestamp(seconds, UTC))}
    except (ValueError, OverflowError, OSError, ValidationError):
        return {}


def _valid_text(text: str) -> str:
    """``text`` with each unpaired surrogate replaced by U+FFFD (a pair written as two
    halves joined): UTF-8, which Loci stores, cannot encode a lone half."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _repaired(value: Any, depth: int = 0) -> Any:
    """``value`` (an event, and the JSON in it) with every string ``_valid_text``; JSON
    nested deeper than Loci takes is left as it is, for Loci to refuse."""
    if isinstance(value, str):
        return _valid_text(value)
    if depth > _REPAIR_DEPTH:
        return value
    if isinstance(value, dict):
        return {_repaired(k, depth + 1): _repaired(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_repaired(v, depth + 1) for v in value]
    return value
