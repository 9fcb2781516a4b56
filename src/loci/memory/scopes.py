"""Where an agent's memories live: its own (``[memory] scope = "agent"``, the default)
or its user's, shared by all their agents (``"user"``).

Shared memories are kept under the user's reserved agent ``SHARED_AGENT``, so the store's
rows and vector indexes stay per (user, agent) and erasing or exporting a user carries
them. With ``"user"`` an agent writes there and reads there first, and still reads the
memories it kept on its own before the setting changed (they stay where they were: none
is moved or lost; ``purge_expired`` purges both), while the mirror, ``sync`` and
consolidation work on the shared ones. Setting ``"agent"`` again leaves the shared ones
in the store, unseen by the agents until ``"user"`` is set again. State and documents
are per agent always.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cached_property

from loci.errors import ValidationError
from loci.memory.service import MemoryService
from loci.memory.timeline import asks_about_past, weighed_by_standing
from loci.models import SHARED_AGENT, Memory, Scope, SearchHit
from loci.retriever import Retriever
from loci.store.base import SearchFilters, Store
from loci.store.values import KINDS

#: Hits one search returns at most.
MAX_SEARCH = 1000


def memory_scopes(scope: Scope, setting: str) -> tuple[Scope, ...]:
    """The scopes ``scope``'s memories are read from, the one they are written to first."""
    if setting == "user" and scope.agent != SHARED_AGENT:
        return Scope(scope.tenant, SHARED_AGENT), scope
    return (scope,)


def list_memories(store: Store, scopes: Sequence[Scope], *, types: Sequence[str] = (),
                  now: datetime | None = None, expired_only: bool = False,
                  limit: int | None = None) -> list[Memory]:
    """``Store.list_memories`` over ``scopes``: newest first."""
    found = [m for scope in scopes for m in store.list_memories(
        scope, types=types, now=now, expired_only=expired_only, limit=limit)]
    if len(scopes) > 1:
        found.sort(key=lambda m: m.updated_at, reverse=True)  # stable: ties keep order
    return found[:limit] if limit is not None else found


def search_memories(retriever: Retriever, scopes: Sequence[Scope], query: str, *,
                    limit: int, filters: SearchFilters,
                    now: datetime | None = None) -> list[SearchHit]:
    """``Retriever.search`` of memories over ``scopes``: best first."""
    hits = [h for scope in scopes for h in retriever.search(
        scope, "memory", query, limit=limit, filters=filters, now=now)]
    if len(scopes) > 1:
        hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit]


def search_items(retriever: Retriever, scopes: tuple[Scope, ...], query: str,
                 kinds: Sequence[str], limit: int, filters: SearchFilters,
                 past: bool | None, now: datetime) -> list[SearchHit]:
    """Hybrid search of ``kinds`` (memories over every memory scope, the rest in the
    agent's own), best first. Memories that no longer hold are found too: ranked below
    those that do (``timeline.weighed_by_standing``) unless the query asks about the
    past (``past`` None: it decides; True: as they rank), left out if ``past`` is
    False."""
    if not 1 <= limit <= MAX_SEARCH:
        raise ValidationError(f"limit must be between 1 and {MAX_SEARCH}")
    if unknown := [kind for kind in kinds if kind not in KINDS]:
        raise ValidationError(f"unknown kind(s) {unknown}: search {', '.join(KINDS)}")
    weigh = past is None and not asks_about_past(query, now)
    filters = replace(filters, now=now if past is False else None)
    wanted = min(limit * 2, 1000) if weigh else limit  # room for what the weights lift
    hits: list[SearchHit] = []
    for kind in kinds:
        for scope in scopes if kind == "memory" else scopes[-1:]:
            hits += retriever.search(scope, kind, query, limit=wanted, filters=filters,
                                     now=now)
    return (weighed_by_standing(hits, now) if weigh else
            sorted(hits, key=lambda h: h.score, reverse=True))[:limit]


class AgentMemories:
    """An agent's memory services over its memory scopes: the one it writes, the one
    that holds a given id, and purging them all."""

    def __init__(self, store: Store, scopes: tuple[Scope, ...],
                 service: Callable[[Scope], MemoryService]) -> None:
        self.store, self.scopes, self.service = store, scopes, service

    @cached_property
    def written(self) -> MemoryService:
        return self.service(self.scopes[0])

    def holding(self, memory_id: str) -> MemoryService:
        """The memories that hold ``memory_id`` (with shared memories, the agent's own
        older ones too; else the written ones, whose ``get`` names a missing id)."""
        written, *older = self.scopes
        if older and self.store.get_memory(written, memory_id) is None:
            for scope in older:
                if self.store.get_memory(scope, memory_id) is not None:
                    return self.service(scope)
        return self.written

    def purge_expired(self) -> int:
        return sum(self.service(scope).purge_expired() for scope in self.scopes)
