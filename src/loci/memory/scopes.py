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

from collections.abc import Sequence
from datetime import datetime

from loci.models import SHARED_AGENT, Memory, Scope, SearchHit
from loci.retriever import Retriever
from loci.store.base import SearchFilters, Store


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
