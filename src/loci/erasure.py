"""Erasure of a session with what was derived from it, and of a whole user.

A session's derived items are the memories saved from it (a reply's tags carry
``session:<id>``, facts extracted from its events ``event:<id>``), its knowledge-base
conversation document (``metadata.session``) and the artifacts its masked tool outputs
became. The user's profile document merges facts of many sessions and is kept. Of the
user's shared memories (``memory.scopes``), those the session's agent wrote are its. A
memory another session stated again (``memory.service.CONFIRMED_FROM``) is no longer the
erased session's alone: it stays, from that session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from loci.checks import OPERATOR
from loci.compaction.masking import artifact_path
from loci.context.history import LiveEvents
from loci.errors import ValidationError
from loci.knowledge import KnowledgeBase
from loci.knowledge.librarian import records
from loci.memory.mirror import Mirror
from loci.memory.scopes import list_memories
from loci.memory.service import AGENT, MemoryService, confirmations
from loci.models import Memory, Scope
from loci.store.base import Store


@dataclass(frozen=True)
class SessionErasure:
    """What erasing a session removed (or, with ``dry_run``, would remove)."""

    session: str
    events: int
    #: Memories and documents derived from the session (kept with ``keep_derived``).
    memories: tuple[str, ...]
    documents: tuple[str, ...]
    keep_derived: bool = False
    dry_run: bool = False


@dataclass(frozen=True)
class RetentionReport:
    """Sessions older than the cutoff, and what was done with them."""

    action: str
    cutoff: datetime
    sessions: int
    events: int


@dataclass(frozen=True)
class UserErasure:
    """What erasing a user removed: the agents (scopes), rows of every table (``keys``
    of them API keys) and memory files; whether the store's files were purged of the
    erased text (``purged``: SQLite's are; PostgreSQL keeps dead rows until it
    vacuums them); ``resumed`` when the rows were already gone, deleted by an erasure
    that was interrupted, and this one finished purging them."""

    user: str
    agents: tuple[str, ...]
    rows: int
    keys: int = 0
    files: int = 0
    purged: bool = False
    resumed: bool = False


class SessionEraser:
    """Erases the sessions of one scope."""

    def __init__(self, store: Store, scope: Scope, memory_scopes: tuple[Scope, ...],
                 holding: Callable[[str], MemoryService], knowledge: KnowledgeBase,
                 live: LiveEvents) -> None:
        """``holding``: the memories that hold an id (of those ``memory_scopes`` read)."""
        self.store, self.scope, self.memory_scopes = store, scope, memory_scopes
        self.holding, self.knowledge, self.live = holding, knowledge, live

    def derived(self, session: str) -> tuple[list[str], list[str]]:
        """Ids of the memories and paths of the documents derived from ``session``
        alone: a memory another session stated again stays, from it."""
        memories, _, documents, _ = self._derived(session)
        return [m.id for m in memories], documents

    def _derived(self, session: str
                 ) -> tuple[list[Memory], list[Memory], list[str], set[str]]:
        """(the memories saved from ``session`` alone, those another session stated
        again, the documents derived from it, its sources), read once."""
        ids = [e.id for e in self.store.list_events(self.scope, session)]
        sources = {f"session:{session}", *(f"event:{i}" for i in ids)}
        alone: list[Memory] = []
        elsewhere: list[Memory] = []
        for m in list_memories(self.store, self.memory_scopes):
            if m.source in sources and m.metadata.get(AGENT, self.scope.agent) == (
                    self.scope.agent):
                (alone if set(confirmations(m)) <= sources else elsewhere).append(m)
        artifacts = {artifact_path(session, i) for i in ids}
        documents = [d.path for d in self.store.list_documents(self.scope, "/")
                     if d.path in artifacts or records(d, session)]
        return alone, elsewhere, documents, sources

    def erase(self, session: str, *, keep_derived: bool = False,
              dry_run: bool = False) -> SessionErasure:
        alone, elsewhere, documents, sources = (
            ([], [], [], set()) if keep_derived else self._derived(session))
        memories = [m.id for m in alone]
        if dry_run:
            events = len(self.store.list_events(self.scope, session))
        else:
            for memory in elsewhere:  # now from the newest other session that said it
                self.holding(memory.id).keep_from_others(memory.id, sources)
            for memory_id in memories:
                self.holding(memory_id).forget(memory_id)
            for path in documents:
                self.knowledge.rm(path)
            events = self.store.erase_session(self.scope, session)
            self.live.drop(self.scope.tenant, self.scope.agent, session)
        return SessionErasure(session, events, tuple(memories), tuple(documents),
                              keep_derived, dry_run)


def scopes_of(store: Store, user: str) -> list[Scope]:
    """The scopes (one per agent) that hold anything of ``user``."""
    return [s for s in store.list_scopes() if s.tenant == user]


def erase_user(store: Store, user: str, mirror_root: Path | None,
               live: LiveEvents) -> UserErasure:
    """Erase everything of ``user``: every agent's rows, index entries and vector files
    (``Store.erase_tenant``), and their memories' markdown files under ``mirror_root``.
    With nothing of ``user`` left, it finishes an interrupted erasure's purge, if one
    is owed (a rerun of an erasure that was killed completes it)."""
    scopes = scopes_of(store, user)
    keys = len(store.list_api_keys(user)) if user != OPERATOR else 0
    if not scopes and not keys:
        resumed = store.finish_erasure()
        return UserErasure(user, (), 0, purged=resumed and store.scrubs_files,
                           resumed=resumed)
    files = 0
    if mirror_root is not None:
        for scope in scopes:
            files += _remove_files(store, mirror_root, scope)
    rows = store.erase_tenant(user)
    live.drop(user)
    return UserErasure(user, tuple(s.agent for s in scopes), rows, keys, files,
                       store.scrubs_files)


def _remove_files(store: Store, root: Path, scope: Scope) -> int:
    """Remove the memory files of ``scope`` under ``root``; how many there were."""
    try:
        mirror = Mirror(root, scope)
    except ValidationError:
        return 0  # a name no mirror file could have been written under
    ids = [m.id for m in store.list_memories(scope)]
    present = sum(1 for i in ids if mirror.path(i).exists())
    mirror.remove_all(ids)
    return present


def apply_retention(store: Store, cutoff: datetime, action: str,
                    live: LiveEvents) -> RetentionReport:
    """Erase (or archive) every session of every user whose last event is older than
    ``cutoff``; memories learned from them stay."""
    sessions = events = 0
    for scope in store.list_scopes():
        for info in store.list_sessions(scope):
            if info.updated_at >= cutoff:
                continue
            if action == "archive":
                live_ids = [e.id for e in store.list_events(scope, info.id,
                                                            include_archived=False)]
                if not live_ids:
                    continue
                events += store.set_archived(scope, info.id, live_ids)
            else:
                events += store.erase_session(scope, info.id)
            live.drop(scope.tenant, scope.agent, info.id)
            sessions += 1
    return RetentionReport(action, cutoff, sessions, events)
