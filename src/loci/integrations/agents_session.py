"""Loci as the session memory of OpenAI Agents SDK agents: ``LociSession`` implements
the SDK's ``Session`` protocol over a Loci session.

``add_items`` records the run's items in the session's event log (messages, function
calls and their outputs as tool calls and results; a reasoning item rides with the
assistant turn it precedes, as the proxy keeps it, and one added with no event to ride
with waits in the scope's state for the next), each item's own JSON kept with its
event. ``get_items`` answers, by default, with Loci's compiled context as input items
(``CompiledContext.to_responses``): the history that fits, the compaction summary,
recalled memories and conversation, instead of a list that only grows; with
``compiled=False`` it gives the items back as they were added. ``pop_item`` archives
the last one (Loci's log never deletes), ``clear_session`` erases the session. Needs the
``openai-agents`` package for its runner, not for this module::

    result = await Runner.run(agent, "Where do I live?",
                              session=LociSession("chat-42", Loci.open(user="maya")))
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import Any

from anyio.to_thread import run_sync

from loci import Loci, NotFoundError, ValidationError
from loci.apis import responses
from loci.apis.media import logged

#: Where an event keeps the items it stands for, as they were added.
ITEMS = "agents_items"
#: The state key (one of Loci's own, ``checks.INTERNAL_STATE``) holding a session's items
#: that wait for an event to ride with.
WAITING = "agents_waiting:"
_KEPT = "provider_blocks"


class LociSession:
    """The Agents SDK's ``Session`` kept by Loci (see the module's docstring)."""

    session_settings = None

    def __init__(self, session_id: str, loci: Loci, *, compiled: bool = True,
                 model: str | None = None) -> None:
        self.session_id, self.loci, self.compiled, self.model = session_id, loci, compiled, model

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        if limit is not None and limit < 0:
            raise ValidationError(f"limit must be at least 0, not {limit}")
        items = await run_sync(self._compiled if self.compiled else self._added)
        if limit is None:
            return items
        newest = items[max(len(items) - limit, 0):] if limit else []
        # The items as added are the SDK's own sessions' (cut where they are cut); the
        # compiled ones go to the model: an output whose call was cut off is left out.
        return _whole_pairs(newest) if self.compiled else newest

    async def add_items(self, items: list[Any]) -> None:
        await run_sync(self._add, [_plain(item) for item in items])

    async def pop_item(self) -> dict[str, Any] | None:
        return await run_sync(self._pop)

    async def clear_session(self) -> None:
        await run_sync(self._hold, [])
        with suppress(NotFoundError):  # nothing recorded yet
            await run_sync(self.loci.erase_session, self.session_id)

    def _add(self, items: list[dict[str, Any]]) -> None:
        """Record ``items``; those with no event to ride with (a reasoning item added
        alone) wait, kept in the scope's state, for the next event."""
        waiting = self._waiting()
        events = _events([*waiting, *items])
        if events:
            self.loci.add_events(self.session_id, events)
        if events and waiting:
            self._hold([])
        elif not events and items:
            self._hold([*waiting, *items])

    def _waiting(self) -> list[dict[str, Any]]:
        held = self.loci.store.get_state(self.loci.scope, WAITING + self.session_id)
        return list(json.loads(held.value)) if held else []

    def _hold(self, items: list[dict[str, Any]]) -> None:
        loci, key = self.loci, WAITING + self.session_id
        if items:
            loci.store.set_state(loci.scope, key, json.dumps(items), loci.clock())
        else:
            loci.store.delete_state(loci.scope, key)

    def _live(self) -> list[Any]:
        try:
            return self.loci.events(self.session_id, include_archived=False)
        except NotFoundError:
            return []

    def _added(self) -> list[dict[str, Any]]:
        return [*(item for event in self._live() if event.type != "summary"
                  for item in (event.metadata or {}).get(ITEMS) or ()), *self._waiting()]

    def _compiled(self) -> list[dict[str, Any]]:
        try:
            self.loci.session(self.session_id)
        except NotFoundError:  # nothing recorded: no context to give yet
            return []
        return self.loci.compile(self.session_id, None, model=self.model,
                                 guest=True).to_responses()

    def _pop(self) -> dict[str, Any] | None:
        """The last item added; its event is archived (and what else it carried added
        again). One pop at a time, in every process: two must not take one item."""
        loci = self.loci
        with loci.store.saving(loci.scope):
            if waiting := self._waiting():  # added last
                self._hold(waiting[:-1])
                return dict(waiting[-1])
            live = [e for e in self._live() if (e.metadata or {}).get(ITEMS)]
            if not live:
                return None
            last = live[-1]
            items = list(last.metadata[ITEMS])
            loci.store.set_archived(loci.scope, self.session_id, [last.id])
            # The live events a compile keeps between calls change at compactions only,
            # unless told: this archive is no compaction.
            loci.runtime.live_events.drop(loci.scope.tenant, loci.scope.agent,
                                          self.session_id)
            if items[:-1]:  # what rode with it stays (and waits, without an event)
                self._add(items[:-1])
            return dict(items[-1])


def _whole_pairs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest items without the outputs at their start whose calls were cut off:
    the next request would send an output of no call, which the API refuses."""
    called = {item.get("call_id") for item in items if item.get("type") == "function_call"}
    start = 0
    while start < len(items) and items[start].get("type") == "function_call_output" and (
            items[start].get("call_id") not in called):
        start += 1
    return items[start:]


def _plain(item: Any) -> dict[str, Any]:
    """An item as plain JSON (the SDK may hand over pydantic objects)."""
    dump = getattr(item, "model_dump", None)
    value = dump(exclude_unset=True) if callable(dump) else item
    if not isinstance(value, dict):
        raise ValidationError(f"an item must be a JSON object, not {type(value).__name__}")
    try:
        return json.loads(json.dumps(value, default=str))  # type: ignore[no-any-return]
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"an item must be JSON: {exc}") from None


def _events(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Loci events for input items; items with no event of their own (reasoning, and
    kinds Loci does not read) ride with the next event, or the last one."""
    events: list[dict[str, Any]] = []
    waiting: list[dict[str, Any]] = []
    for item in items:
        event = _event(item)
        if event is None:
            waiting.append(item)
            continue
        kept = [w for w in waiting if w.get("type") == "reasoning"]
        event["metadata"] = {ITEMS: [*waiting, item], **({_KEPT: kept} if kept else {})}
        events.append(event)
        waiting = []
    if waiting and events:
        events[-1]["metadata"][ITEMS] += waiting
    return events


def _event(item: dict[str, Any]) -> dict[str, Any] | None:
    kind = item.get("type", "message")
    if kind == "message" or (kind is None and "role" in item):
        role = str(item.get("role") or "user")
        return {"type": "message", "role": "system" if role == "developer" else role,
                "content": _text(item.get("content"))}
    if kind == "function_call":
        raw = item.get("arguments") or "{}"
        try:
            args = raw if isinstance(raw, dict) else json.loads(str(raw))
        except (ValueError, RecursionError):
            args = {"arguments": raw}
        return {"type": "tool_call", "role": "assistant", "tool_name": str(item.get("name")),
                "tool_call_id": str(item.get("call_id") or ""),
                "args": args if isinstance(args, dict) else {"arguments": args}}
    if kind == "function_call_output":
        output = item.get("output")
        return {"type": "tool_result", "role": "tool",
                "tool_call_id": str(item.get("call_id") or ""),
                "content": output if isinstance(output, str) else json.dumps(output)}
    return None


def _text(content: Any) -> str:
    """A message's text as the log keeps it: its text and refusal parts, then a line
    per image or file it showed (``apis.media.logged``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    said: list[str] = []
    shown: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text", "refusal"):
            said.append(str(part.get("refusal" if kind == "refusal" else "text") or ""))
        elif kind in ("input_image", "input_file"):
            try:
                shown.append(responses.media_part(part))
            except ValidationError:  # by file id: named by its kind alone
                shown.append({"type": kind})
    return logged("\n".join(said), shown)
