"""Choosing history: whole steps, never a tool call without its result, the user
message that opened the first kept step's turn always in front (in an agent's tool
loop: its task), and a start that moves rarely so the prompt prefix stays cacheable.

A *step* is what one model call produced and what answered it: a message, or an
assistant's tool call(s) with their results (parallel calls stay together, and so does
the assistant text right before them). An agent's task followed by sixty tool steps is
one turn but sixty-one steps, so history and compaction can cut inside it.

Trimming the oldest step whenever a new one arrives would change the start of history
on every request and defeat prefix caching. Instead the start may only sit at *cut
points*: the first step boundary after every ``budget / 2`` tokens of the log. The
start is the earliest cut point whose remainder fits, so it advances about once per
half budget of new conversation (compaction normally runs long before that).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from loci.models import SHARED_KEYS, Event, Scope
from loci.store.base import Store

#: A pinned task longer than this share of the history budget keeps its head and tail.
TASK_SHARE = 0.25


def group_steps(events: Sequence[Event]) -> list[list[Event]]:
    """Split events into steps (see the module doc): history and compaction cut only
    between steps, so a tool call never loses its result."""
    steps: list[list[Event]] = []
    for event in events:
        previous = steps[-1][-1] if steps else None
        joins = previous is not None and (
            event.type == "tool_result"
            or (event.type == "tool_call" and (previous.type == "tool_call" or (
                previous.type == "message" and previous.role == "assistant"))))
        if not joins:
            steps.append([])
        steps[-1].append(event)
    return steps


def select_steps(steps: Sequence[list[Event]], budget: int) -> tuple[int, int]:
    """(index of the first kept step, tokens kept) for a history budget."""
    sizes = [sum(e.tokens for e in step) for step in steps]
    total = sum(sizes)
    if total <= budget:
        return 0, total
    step = max(1, budget // 2)
    before = 0  # tokens of the steps before index i
    next_cut = step
    remaining = total
    for index, size in enumerate(sizes):
        if before >= next_cut or index == 0:
            while next_cut <= before:
                next_cut += step
            if remaining <= budget:
                return index, remaining
        before += size
        remaining -= size
    # Not even the last cut fits: keep the newest steps that fit, whole.
    kept, used = len(sizes), 0
    while kept > 0 and used + sizes[kept - 1] <= budget:
        kept -= 1
        used += sizes[kept]
    return kept, used


@dataclass(frozen=True)
class History:
    """The events history shows (some shortened), and what was cut or shortened."""

    events: list[Event]
    tokens: int
    dropped_steps: int
    pinned_task: Event | None
    shortened: int


def choose_history(live: Sequence[Event], budget: int) -> History:
    """The history for ``budget`` tokens: the newest steps from a stable cut point,
    the user message that opened the first kept step's turn pinned in front (for the
    newest turn: the agent's task), and never nothing while there are events (the
    newest step, its outputs shortened, when not even it fits)."""
    steps = group_steps(live)
    start, used = select_steps(steps, budget)
    opener: Event | None = None
    pinned: Event | None = None
    for _ in range(3):  # each pass can only move the start later
        found = turn_opener(steps, start)
        if found is None and pinned is not None:  # the start reached a user message
            used, opener, pinned = used - pinned.tokens, None, None
        if found is None or (opener is not None and found.id == opener.id):
            break
        opener, pinned = found, shorten(found, int(budget * TASK_SHARE))
        after = next((i for i, s in enumerate(steps) if s[0].id > found.id), len(steps))
        offset, used = select_steps(steps[after:], max(budget - pinned.tokens, 0))
        start, used = after + offset, used + pinned.tokens
    kept = [e for step in steps[start:] for e in step]
    shortened = int(pinned is not opener)
    if not kept and steps and (opener is None or steps[-1][0].id > opener.id):
        room = max(budget - used, 0) // len(steps[-1])
        start = len(steps) - 1
        kept = [shorten(e, max(room, 1)) for e in steps[-1]]
        shortened += sum(a is not b for a, b in zip(kept, steps[-1], strict=True))
        used += sum(e.tokens for e in kept)
    events = [pinned, *kept] if pinned is not None else kept
    return History(events, used, max(start - (pinned is not None), 0), pinned, shortened)


def turn_opener(steps: Sequence[list[Event]], start: int) -> Event | None:
    """The user message that opened the turn of ``steps[start]``, when it lies before
    it (a history that starts mid-turn shows what the steps answer)."""
    if start < len(steps) and _is_user(steps[start][0]):
        return None
    for step in reversed(steps[:start]):
        if _is_user(step[0]):
            return step[0]
    return None


def _is_user(event: Event) -> bool:
    return event.type == "message" and event.role == "user"


#: Tokens a shortened text keeps at least, and what its pointer to the event costs.
MIN_SHOWN = 50
POINTER_TOKENS = 24


def shorten(event: Event, tokens: int) -> Event:
    """``event`` as history shows it within about ``tokens`` tokens: its head and
    tail with a pointer to the stored event (which keeps everything)."""
    if event.tokens <= tokens:
        return event
    shown = event.masked if event.masked is not None else event.shown_content
    if event.type == "message":  # what it shared is shortened with it, shown once
        event = replace(event, metadata={k: v for k, v in event.metadata.items()
                                         if k not in SHARED_KEYS})
    # Characters per token of this very text (a script of one character a token is a
    # quarter of English's), as its stored count measured it.
    density = max(len(shown), 1) / max(event.tokens, 1)
    chars = int(max(tokens, MIN_SHOWN) * density)
    head, tail = shown[: chars * 2 // 3], shown[-(chars // 3):]
    text = (f"{head}\n… [{len(shown) - len(head) - len(tail):,} characters left out here; "
            f"the whole text is event {event.id}] …\n{tail}")
    tokens = min(int((len(head) + len(tail)) / density) + POINTER_TOKENS, event.tokens)
    if event.type == "tool_result":
        return replace(event, masked=text, tokens=tokens)
    return replace(event, content=text, tokens=tokens)


class LiveEvents:
    """The live (unarchived) events of recently compiled sessions, kept between
    compiles so that each compile reads only what was appended since. The log is
    append-only and only compactions archive or mask events, so a session's entry is
    reloaded whenever its number of compactions changes."""

    def __init__(self, sessions: int = 64) -> None:
        self._entries: OrderedDict[tuple[str, str, str], tuple[int, list[Event]]] = (
            OrderedDict())
        self._size = sessions
        # Shared by the scopes of a runtime, which compile in several threads; the
        # store is read outside the lock.
        self._lock = threading.Lock()

    def drop(self, tenant: str, agent: str | None = None, session: str | None = None) -> None:
        """Forget the entries of an erased tenant, or of one of its agents' sessions."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == tenant and (
                    agent is None or k[1:] == (agent, session))]:
                del self._entries[key]

    def get(self, store: Store, scope: Scope, session: str, compactions: int) -> list[Event]:
        key = (scope.tenant, scope.agent, session)
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] == compactions:
            events = entry[1]
            after = events[-1].id if events else 0
            events = events + store.list_events(scope, session, include_archived=False,
                                                after_id=after)
        else:
            events = store.list_events(scope, session, include_archived=False)
        with self._lock:
            self._entries[key] = (compactions, events)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return events
