"""The values the storage contract takes and returns: search filters and candidates,
a compaction's plan and record, a scope's whole data for a copy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from loci.errors import ConflictError
from loci.models import (
    Compaction,
    Document,
    DocumentVersion,
    Event,
    Memory,
    MemoryVersion,
    NewEvent,
    Scope,
    StateItem,
    UsageRecord,
)


@dataclass(frozen=True)
class SearchFilters:
    """Narrow a search. Unset fields do not filter."""

    types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    session: str | None = None
    #: Events of these sessions only (empty: any session).
    sessions: tuple[str, ...] = ()
    path_prefix: str | None = None
    include_archived: bool = True
    #: Memories whose expiry is at or before this instant are left out.
    now: datetime | None = None

    def narrowing(self) -> bool:
        """Whether they pick rows by something that may leave few (the expiry and
        archive tests never leave few in practice): stores then look for those few."""
        return bool(self.types or self.tags or self.since or self.until
                    or self.session is not None or self.sessions or self.path_prefix)


NO_FILTERS = SearchFilters()
#: Unit-length float32 vectors, one per row.
Vectors = npt.NDArray[np.float32]
#: The kinds of searchable items.
KINDS = ("event", "memory", "document")
#: A search candidate: the store's own key for an item (meaningful only to pass back
#: to ``Store.hits``) and its score in [0, 1].
Scored = tuple[int, float]


@dataclass(frozen=True)
class CompactionPlan:
    """Everything one compaction changes, applied atomically by ``apply_compaction``."""

    compaction: NewCompaction
    #: event id → (text history shows instead of the content, its token count)
    masks: dict[int, tuple[str, int]]
    artifacts: tuple[Document, ...] = ()
    archive_ids: tuple[int, ...] = ()
    summary: NewEvent | None = None
    #: The session's newest compaction id when the plan read its events (0: none):
    #: applying fails with ``ConflictError`` if another compaction came since.
    after_compaction: int = 0

    def check_basis(self, newest: int) -> None:
        """Refuse to apply over ``newest``, the session's newest compaction id read in
        the applying transaction, when it is not the one the plan was made after (two
        processes compacting one span at once)."""
        if newest != self.after_compaction:
            raise ConflictError("the session was compacted by another process meanwhile")


@dataclass(frozen=True)
class ScopeData:
    """Everything one scope holds, ids included: what ``loci migrate`` copies between
    stores (``export_scope`` → ``import_scope``) without losing anything."""

    scope: Scope
    #: Every session's events in id order, with ``archived`` and ``masked``.
    events: tuple[Event, ...] = ()
    #: Memories in the order they were first written (it breaks ties in listings).
    memories: tuple[Memory, ...] = ()
    #: Superseded versions, each with the ``source`` of the version.
    memory_versions: tuple[tuple[MemoryVersion, str | None], ...] = ()
    state: tuple[StateItem, ...] = ()
    documents: tuple[Document, ...] = ()
    document_versions: tuple[DocumentVersion, ...] = ()
    compactions: tuple[Compaction, ...] = ()
    usage: tuple[UsageRecord, ...] = ()
    #: kind → (ids, one vector per id) of the items embedded so far.
    vectors: dict[str, tuple[list[str], Vectors]] = field(default_factory=dict)


@dataclass(frozen=True)
class NewCompaction:
    """A compaction to record; the store assigns ``id``."""

    session: str
    strategy: str
    first_event_id: int
    last_event_id: int
    summary_event_id: int | None
    summary: str
    tokens_before: int
    tokens_after: int
    created_at: datetime


#: Rewrites what a scope's rows say of event ids in text the store does not read (a
#: memory's source, a mask, a state value), given the new id of each old one; the
#: domain that writes those texts knows them (``loci.portability``).
Renumber = Callable[[ScopeData, Callable[[int], int]], ScopeData]
