"""The storage contract that every backend implements unchanged.

A backend stores five things per scope (tenant → agent): the append-only event log of
each session, memories, key/value state, knowledge documents and compaction records.
Every method takes the caller's :class:`~loci.models.Scope` and must never read or
write outside it. Backends own their SQL; nothing outside ``loci.store`` branches on
which backend is in use.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from loci.models import (
    ApiKey,
    Compaction,
    Document,
    DocumentVersion,
    Event,
    Memory,
    MemoryVersion,
    NewEvent,
    NewUsage,
    Scope,
    SearchHit,
    SessionInfo,
    StateItem,
    UsageRecord,
)

# The contract's values live in ``store/values.py``; they are named here too.
from loci.store.values import KINDS as KINDS
from loci.store.values import NO_FILTERS as NO_FILTERS
from loci.store.values import CompactionPlan as CompactionPlan
from loci.store.values import NewCompaction as NewCompaction
from loci.store.values import Renumber as Renumber
from loci.store.values import ScopeData as ScopeData
from loci.store.values import Scored as Scored
from loci.store.values import SearchFilters as SearchFilters
from loci.store.values import Vectors as Vectors

#: The ``meta`` key a ``loci migrate`` target holds, naming its source, until the copy
#: is complete (``Store.mark_copy``).
MIGRATING_FROM = "migrating_from"
#: ``meta`` keys of a store's own bookkeeping, which a copy never takes from its source.
OWN_META = frozenset({MIGRATING_FROM, "scrub_pending"})


class Store(ABC):
    """Abstract storage backend. Implementations must be safe to share between threads."""

    url: str

    @abstractmethod
    def close(self) -> None: ...

    def local_lock(self) -> threading.RLock | None:
        """For a store that computes in this process (SQLite): the lock its writes hold
        (and, in memory, its reads), so a caller can tell whether a call would wait.
        None for a store whose calls wait on a server (PostgreSQL)."""
        return None

    @abstractmethod
    def saving(self, scope: Scope) -> AbstractContextManager[None]:
        """Hold off the other deduplicated saves of ``scope``'s memories, in every
        process, while one reads what is stored and writes: two processes saving one
        fact would otherwise each find no duplicate and store it twice."""

    def reads_alongside(self) -> bool:
        """Whether reads on several threads run at once, none waiting for a lock that
        another thread's call may hold (False for a store in memory, whose one
        connection serializes them)."""
        return True

    def vector_memory(self) -> tuple[int, int | None]:
        """Bytes of vectors this process holds in memory for search, and the most it
        may hold (None: no limit)."""
        return 0, None

    # -- metadata about the store itself (schema, embedding model) ----------------
    @abstractmethod
    def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    @abstractmethod
    def claim_meta(self, key: str, value: str) -> str:
        """The value stored under ``key``, storing ``value`` first if there is none
        (atomic: of processes claiming at once, every one reads the first's value)."""

    @abstractmethod
    def delete_meta(self, key: str) -> None: ...

    # -- events -------------------------------------------------------------------
    @abstractmethod
    def append_events(
        self, scope: Scope, session: str, events: Sequence[NewEvent]
    ) -> list[Event]:
        """Append all of ``events`` in one transaction (all or nothing), in order."""

    @abstractmethod
    def list_events(
        self,
        scope: Scope,
        session: str,
        *,
        include_archived: bool = True,
        after_id: int = 0,
        limit: int | None = None,
    ) -> list[Event]:
        """Events of a session in log order, optionally only those after ``after_id``."""

    @abstractmethod
    def tail_events(
        self, scope: Scope, session: str, limit: int, *, include_archived: bool = False,
        before_id: int | None = None,
    ) -> list[Event]:
        """The last ``limit`` events of a session (before the event ``before_id``, if
        given), in log order."""

    @abstractmethod
    def set_archived(self, scope: Scope, session: str, ids: Sequence[int]) -> int:
        """Mark events archived (never deleted); returns how many changed."""

    @abstractmethod
    def redact_events(self, scope: Scope, session: str,
                      metadata: Mapping[int, Mapping[str, Any]]) -> int:
        """Replace the metadata of events (the only redaction the append-only log
        allows: a reply's raw text with a forgotten tag); nothing of the old metadata
        stays on disk. Returns how many changed."""

    @abstractmethod
    def apply_compaction(self, scope: Scope, session: str, plan: CompactionPlan
                         ) -> tuple[Event | None, Compaction]:
        """Apply a whole compaction in one transaction: masks (history text and token
        count; the content stays), artifact documents, the summary event, the archived
        span and the compaction record. All or nothing: a process killed midway leaves
        the session as it was. Returns the summary event (if any) and the record."""

    @abstractmethod
    def session_info(self, scope: Scope, session: str) -> SessionInfo | None: ...

    @abstractmethod
    def session_activity(self, scope: Scope, session: str) -> tuple[int, datetime] | None:
        """(tokens of live, unarchived events, time of the last event), cheaply: the
        compaction policy asks this on every turn."""

    @abstractmethod
    def latest_summary(self, scope: Scope, session: str) -> Event | None:
        """The newest unarchived summary event of a session."""

    @abstractmethod
    def list_sessions(self, scope: Scope) -> list[SessionInfo]: ...

    @abstractmethod
    def speaker_sessions(self, scope: Scope, names: Sequence[str], limit: int
                         ) -> list[tuple[str, int]]:
        """Up to ``limit`` sessions in which someone of ``names`` speaks (the ``name``
        in an event's metadata, as written), with how many of its events they speak,
        most first (then by session), through an index of the speakers."""

    @abstractmethod
    def speakers_among(self, scope: Scope, names: Sequence[str]) -> set[str]:
        """Those of ``names`` who speak in the scope (the ``name`` in an event's
        metadata, as written): one look in the index of speakers for each, however
        many turns they speak."""

    def search_events(
        self, scope: Scope, query: str, *, limit: int = 10, filters: SearchFilters = NO_FILTERS
    ) -> list[SearchHit]:
        """Keyword search over event content; ``query`` is user text, never syntax."""
        return self.hits(scope, "event", self.keyword_candidates(
            scope, "event", query, limit=limit, filters=filters))

    # -- usage --------------------------------------------------------------------
    @abstractmethod
    def add_usage(self, scope: Scope, call: NewUsage) -> UsageRecord:
        """Record an LLM call of ``call.session``, with the session's log as it stands
        (its tokens and events, summaries left out) and its compactions so far."""

    @abstractmethod
    def list_usage(self, tenant: str, agent: str | None = None, session: str | None = None,
                   since: datetime | None = None, until: datetime | None = None,
                   ) -> list[UsageRecord]:
        """The tenant's recorded calls, oldest first: of an agent, of a session, from
        ``since`` (included) to ``until`` (excluded)."""

    # -- memories -----------------------------------------------------------------
    @abstractmethod
    def put_memory(self, scope: Scope, memory: Memory) -> None:
        """Insert the memory, or replace the one with the same id in this scope."""

    @abstractmethod
    def put_memories(
        self, scope: Scope, memories: Sequence[Memory], vectors: Vectors | None = None
    ) -> None:
        """``put_memory`` for many in one transaction, optionally with precomputed
        vectors (one row per memory, made by the store's recorded model)."""

    @abstractmethod
    def get_memory(self, scope: Scope, memory_id: str) -> Memory | None: ...

    @abstractmethod
    def list_memories(
        self,
        scope: Scope,
        *,
        types: Sequence[str] = (),
        now: datetime | None = None,
        expired_only: bool = False,
        limit: int | None = None,
    ) -> list[Memory]:
        """Memories newest first. With ``now``, expired ones are left out (or, with
        ``expired_only``, only they are returned)."""

    @abstractmethod
    def delete_memory(self, scope: Scope, memory_id: str) -> bool:
        """Hard-delete a memory and its history (an explicit forget), leaving nothing of
        them in the store's files (full-text index, vectors, journal)."""

    @abstractmethod
    def supersede_memory(self, scope: Scope, memory: Memory, reason: str, now: datetime) -> int:
        """Atomically keep the stored version of ``memory.id`` in its history and
        replace it with ``memory``; returns the number of the archived version."""

    @abstractmethod
    def memory_history(self, scope: Scope, memory_id: str) -> list[MemoryVersion]:
        """Earlier versions of a memory, oldest first."""

    @abstractmethod
    def purge_expired(self, scope: Scope, now: datetime) -> int:
        """Hard-delete memories expired at ``now`` (and their history), not those another
        memory superseded (its history); returns how many."""

    def search_memories(
        self, scope: Scope, query: str, *, limit: int = 10, filters: SearchFilters = NO_FILTERS
    ) -> list[SearchHit]:
        """Keyword search over memories (expired ones left out with ``filters.now``)."""
        return self.hits(scope, "memory", self.keyword_candidates(
            scope, "memory", query, limit=limit, filters=filters))

    # -- state --------------------------------------------------------------------
    @abstractmethod
    def set_state(self, scope: Scope, key: str, value: str, now: datetime) -> StateItem: ...

    @abstractmethod
    def get_state(self, scope: Scope, key: str) -> StateItem | None: ...

    @abstractmethod
    def list_state(self, scope: Scope) -> list[StateItem]: ...

    @abstractmethod
    def delete_state(self, scope: Scope, key: str) -> bool: ...

    # -- documents ----------------------------------------------------------------
    @abstractmethod
    def put_document(self, scope: Scope, document: Document) -> Document:
        """Insert the document at ``document.path``, or replace it keeping the replaced
        version in its history; returns the stored document.

        The store numbers versions: a new path keeps ``document.version``; a changed
        content, tags or metadata becomes the stored version + 1 (``created_at`` stays);
        writing what is already stored changes nothing."""

    @abstractmethod
    def put_documents(self, scope: Scope, documents: Sequence[Document],
                      expected: Mapping[str, str] | None = None) -> list[Document]:
        """``put_document`` for many in one transaction (all or nothing). ``expected``:
        by path, the content SHA-256 the writer last saw ("" for no document); a path
        whose stored content differs is a ``ConflictError`` and nothing is written."""

    @abstractmethod
    def get_document(self, scope: Scope, path: str) -> Document | None: ...

    @abstractmethod
    def get_documents(self, scope: Scope, paths: Sequence[str]) -> list[Document]:
        """The documents at ``paths``, in that order, in one query (missing ones left
        out)."""

    @abstractmethod
    def list_documents(self, scope: Scope, prefix: str = "/") -> list[Document]: ...

    @abstractmethod
    def delete_document(self, scope: Scope, path: str) -> bool:
        """Hard-delete a document and its history (an explicit removal), leaving nothing
        of them in the store's files."""

    @abstractmethod
    def document_history(self, scope: Scope, path: str) -> list[DocumentVersion]:
        """Earlier versions of a document, oldest first."""

    @abstractmethod
    def redact_document_version(self, scope: Scope, path: str, version: int,
                                metadata: Mapping[str, Any]) -> bool:
        """Empty an earlier version's text and tags and set its ``metadata``; the version
        stays in the history, and nothing of its text on disk. False if there is no such
        earlier version."""

    def search_documents(
        self, scope: Scope, query: str, *, limit: int = 10, filters: SearchFilters = NO_FILTERS
    ) -> list[SearchHit]:
        """Keyword search over knowledge documents (path and content)."""
        return self.hits(scope, "document", self.keyword_candidates(
            scope, "document", query, limit=limit, filters=filters))

    # -- compactions --------------------------------------------------------------
    @abstractmethod
    def add_compaction(self, scope: Scope, compaction: NewCompaction) -> Compaction: ...

    @abstractmethod
    def list_compactions(self, scope: Scope, session: str) -> list[Compaction]: ...

    @abstractmethod
    def count_compactions(self, scope: Scope, session: str) -> int:
        """How many times ``session`` was compacted (every compile asks; a long-lived
        session's summaries are not read for it)."""

    # -- API keys -----------------------------------------------------------------
    # Keys belong to no scope: each binds a secret (stored only as its SHA-256) to one
    # tenant, and the server derives every request's scope from it.
    @abstractmethod
    def add_api_key(self, key: ApiKey, secret_hash: str) -> None: ...

    @abstractmethod
    def find_api_key(self, secret_hash: str) -> ApiKey | None:
        """The active (not revoked) key with this hash, if any."""

    @abstractmethod
    def list_api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first; one tenant's if given."""

    @abstractmethod
    def revoke_api_key(self, key_id: str) -> bool: ...

    # -- erasure: nothing of what is erased stays in the store's files -------------------
    @abstractmethod
    def erase_session(self, scope: Scope, session: str) -> int:
        """Delete a session's events and compactions, with their index entries and
        vectors; the number of events erased."""

    @abstractmethod
    def erase_tenant(self, tenant: str) -> int:
        """Delete everything of ``tenant``: every agent's events, memories with their
        history, state, documents with their versions, compactions, API keys, index
        entries and vector files; the number of rows erased. Other tenants are untouched."""

    #: Whether an erasure purges the erased text from the store's own files (SQLite:
    #: full-text segments, free pages, the log), rather than leaving dead rows to the
    #: database's vacuum (PostgreSQL).
    scrubs_files: bool = False

    def finish_erasure(self) -> bool:
        """Finish what an erasure interrupted after its rows were deleted left to purge
        from the store's files (a backend that keeps nothing of deleted rows in its own
        files has nothing to finish); whether there was something."""
        return False

    # -- whole-store copies (``loci migrate``) --------------------------------------
    #: ``meta`` keys of the store's own bookkeeping, which a copy never takes.
    own_meta = OWN_META

    def copying_from(self) -> str | None:
        """The source of an unfinished ``loci migrate`` into this store, if any."""
        return self.get_meta(MIGRATING_FROM)

    def mark_copy(self, source: str | None) -> None:
        """Mark this store an unfinished copy of ``source``, before anything is copied;
        with None, once everything is, mark it complete."""
        if source is None:
            self.delete_meta(MIGRATING_FROM)
        else:
            self.set_meta(MIGRATING_FROM, source)

    @abstractmethod
    def list_scopes(self) -> list[Scope]:
        """Every scope that holds anything, sorted."""

    @abstractmethod
    def list_meta(self) -> dict[str, str]: ...

    @abstractmethod
    def export_scope(self, scope: Scope) -> ScopeData:
        """Everything ``scope`` holds (see :class:`ScopeData`)."""

    def import_scope(self, data: ScopeData) -> None:
        """Write an exported scope into this store, keeping every id, flag, version and
        vector. The store must not hold that scope yet, nor rows with its ids (event,
        compaction and usage ids are global): else a ``ConflictError``."""
        self.import_scopes([data])

    @abstractmethod
    def import_scopes(self, scopes: Sequence[ScopeData], renumber: Renumber | None = None
                      ) -> None:
        """Write exported scopes in one transaction, their vectors after it: ids kept
        while none is taken here, else (with ``renumber``, which rewrites the texts that
        name events) moved past this store's highest (``store.transfer.placed``)."""

    def set_vectors_of(self, data: ScopeData) -> None:
        """Write again the vectors of a scope imported before (a resumed copy: the
        rows come in one transaction, their vectors after it)."""
        for kind, (ids, vectors) in data.vectors.items():
            if ids:
                self.set_embeddings(data.scope, kind, ids, vectors)

    @abstractmethod
    def export_api_keys(self) -> list[tuple[ApiKey, str]]:
        """Every API key with its secret's hash (to copy keys between stores)."""

    # -- embeddings ---------------------------------------------------------------
    # Items are written first and embedded after, so a failing embedding provider never
    # loses a write: what is not embedded yet is listed by ``unembedded``.
    @abstractmethod
    def unembedded(
        self, kind: str, limit: int, scope: Scope | None = None
    ) -> list[tuple[Scope, str, str]]:
        """Up to ``limit`` items of ``kind`` with no vector yet, oldest first, as
        (scope, id, text to embed); all scopes unless ``scope`` is given."""

    @abstractmethod
    def count_unembedded(self, kind: str) -> int: ...

    @abstractmethod
    def set_embeddings(
        self, scope: Scope, kind: str, ids: Sequence[str], vectors: Vectors
    ) -> None:
        """Store one vector per id (an all-zero row means "nothing to embed")."""

    @abstractmethod
    def clear_embeddings(self) -> None:
        """Forget every vector (before re-embedding with another model)."""

    def vector_search(
        self, scope: Scope, kind: str, query: Vectors, *, limit: int, filters: SearchFilters
    ) -> list[SearchHit]:
        """Items most similar to the unit vector ``query``; score = cosine clipped to
        [0, 1]; filters apply as in keyword search."""
        return self.hits(scope, kind, self.vector_candidates(
            scope, kind, query, limit=limit, filters=filters))

    # -- candidates: searching without reading the items -------------------------------
    # A hybrid search fuses two pools of candidates and returns a few of them: reading
    # and building every candidate's hit (~60 per search for 10 returned) cost more
    # than fusing them. So the retriever fuses candidates and reads the winners.

    @abstractmethod
    def keyword_candidates(
        self, scope: Scope, kind: str, query: str, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        """What keyword search of ``kind`` finds, as candidates, best first."""

    @abstractmethod
    def vector_candidates(
        self, scope: Scope, kind: str, query: Vectors, *, limit: int, filters: SearchFilters
    ) -> list[Scored]:
        """What ``vector_search`` finds, as candidates, best first."""

    @abstractmethod
    def vector_scores(
        self, scope: Scope, kind: str, query: Vectors, keys: Sequence[int]
    ) -> list[Scored]:
        """The cosines (clipped to [0, 1]) of the scope's items among ``keys`` that have
        a vector, best first: how a candidate found another way scores by vector."""

    @abstractmethod
    def hits(self, scope: Scope, kind: str, scored: Sequence[Scored]) -> list[SearchHit]:
        """The candidates' items as hits with the candidates' scores, in their order
        (items deleted since are left out)."""
