"""Choosing history: whole turns, never a tool call without its result, and a start
that moves rarely so the prompt prefix stays cacheable.

Trimming the oldest turn whenever a new one arrives would change the start of history
on every request and defeat prefix caching. Instead the start may only sit at *cut
points*: the first turn boundary after every ``budget / 2`` tokens of the log. The
start is the earliest cut point whose remainder fits, so it advances about once per
half budget of new conversation (compaction normally runs long before that).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from loci.models import Event, Scope
from loci.store.base import Store


def group_turns(events: Sequence[Event]) -> list[list[Event]]:
    """Split events into turns, each starting at a user message, so that history is
    trimmed by whole turns and a tool call never loses its result."""
    turns: list[list[Event]] = []
    for event in events:
        if not turns or (event.type == "message" and event.role == "user"):
            turns.append([])
        turns[-1].append(event)
    return turns


def select_turns(turns: Sequence[list[Event]], budget: int) -> tuple[int, int]:
    """(index of the first kept turn, tokens kept) for a history budget."""
    sizes = [sum(e.tokens for e in turn) for turn in turns]
    total = sum(sizes)
    if total <= budget:
        return 0, total
    step = max(1, budget // 2)
    before = 0  # tokens of the turns before index i
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
    # Not even the last cut fits: keep the newest turns that fit, whole.
    kept, used = len(sizes), 0
    while kept > 0 and used + sizes[kept - 1] <= budget:
        kept -= 1
        used += sizes[kept]
    return kept, used


class LiveEvents:
    """The live (unarchived) events of recently compiled sessions, kept between
    compiles so that each compile reads only what was appended since. The log is
    append-only and only compactions archive or mask events, so a session's entry is
    reloaded whenever its number of compactions changes."""

    def __init__(self, sessions: int = 64) -> None:
        self._entries: OrderedDict[tuple[str, str, str], tuple[int, list[Event]]] = (
            OrderedDict())
        self._size = sessions

    def get(self, store: Store, scope: Scope, session: str, compactions: int) -> list[Event]:
        key = (scope.tenant, scope.agent, session)
        entry = self._entries.pop(key, None)
        if entry is not None and entry[0] == compactions:
            events = entry[1]
            after = events[-1].id if events else 0
            events = events + store.list_events(scope, session, include_archived=False,
                                                after_id=after)
        else:
            events = store.list_events(scope, session, include_archived=False)
        self._entries[key] = (compactions, events)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return events
