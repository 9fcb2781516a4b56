"""``AsyncLoci``: the surface of :class:`~loci.engine.Loci` for asyncio programs.

Each method is a coroutine, run where its waiting is:

- A call that reads, writes and computes only in this process (a SQLite store, an
  in-process embedder or none) runs right on the event loop when the store is free: a
  thread would cost more than the call and gain nothing, since the store's one
  connection and the GIL serialize the work anyway. Otherwise (PostgreSQL, an embedding
  API, the store busy in another thread) it runs in a worker thread, so that the loop
  serves other tasks while it waits.
- A call that may wait on the chat model (compaction's summary, extraction, the
  librarian: ``compile``, ``turn``, ``reply``, ``add_reply``, ``compact``, ...) runs in a
  worker thread when a chat model is configured; without one it is a local call.
- Bulk work (``reindex``, ``import_jsonl``, ``import_log``, ``export_jsonl``) always runs
  in a thread.

``knowledge`` and ``usage`` are the view's services as they are (their calls only touch
the store); ``loci`` is the :class:`Loci` underneath, for anything else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from loci.compaction.compactor import CompactionResult
from loci.context.compiled import CompiledContext
from loci.context.focus import Focus
from loci.context.workspace import Workspace
from loci.erasure import SessionErasure
from loci.importers import ImportReport
from loci.knowledge import DocumentPage, DocumentSummary, KnowledgeBase, SessionKnowledge
from loci.memory.consolidate import Consolidation, Proposal
from loci.memory.extract import Extractor
from loci.memory.service import ReplyResult, SaveResult
from loci.memory.sync import SyncReport
from loci.memory.tools import MemoryPage, MemorySummary
from loci.models import (
    Compaction,
    Event,
    Memory,
    MemoryVersion,
    SearchHit,
    SessionInfo,
    StateItem,
)
from loci.runtime import Loci
from loci.store import SearchFilters
from loci.timeutil import Clock, utc_now
from loci.turns import Turn
from loci.usage import UsageLedger

T = TypeVar("T")


class AsyncLoci:
    """Context and memory for one user's agent, as coroutines.

    >>> import asyncio
    >>> async def main() -> str:
    ...     async with AsyncLoci.open(store="sqlite:///:memory:") as loci:
    ...         turn = await loci.turn("s1", "I live in Lisbon.")
    ...         await loci.reply(turn, "Noted.")
    ...         return (await loci.events("s1"))[-1].content
    >>> asyncio.run(main())
    'Noted.'
    """

    def __init__(self, loci: Loci) -> None:
        self.loci = loci

    @classmethod
    def open(cls, *, clock: Clock = utc_now, **settings: Any) -> AsyncLoci:
        """Open with settings loaded from files and environment, plus ``settings``."""
        return cls(Loci.open(clock=clock, **settings))

    def for_scope(self, user: str | None = None, agent: str | None = None) -> AsyncLoci:
        """The same runtime seen as another user or agent."""
        return AsyncLoci(self.loci.for_scope(user, agent))

    async def close(self) -> None:
        """Close the runtime if this view built it (it joins background work)."""
        await asyncio.to_thread(self.loci.close)

    async def __aenter__(self) -> AsyncLoci:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def knowledge(self) -> KnowledgeBase:
        return self.loci.knowledge

    @property
    def usage(self) -> UsageLedger:
        return self.loci.usage

    def workspace(self) -> Workspace:
        return self.loci.workspace()

    def history_budget(self, model: str | None = None, window: int | None = None) -> int:
        return self.loci.history_budget(model, window)

    async def wait_indexed(self, timeout: float | None = None) -> bool:
        """``Loci.wait_indexed``, in a thread (the indexer needs the store meanwhile)."""
        return await self._bulk(lambda: self.loci.wait_indexed(timeout))

    async def wait_extracted(self, timeout: float | None = None) -> bool:
        """``Loci.wait_extracted``, in a thread (extraction needs the store meanwhile)."""
        return await self._bulk(lambda: self.loci.wait_extracted(timeout))

    async def _local(self, call: Callable[[], T]) -> T:
        runtime = self.loci.runtime
        lock = runtime.local_lock() if runtime.in_process else None
        if lock is not None and lock.acquire(blocking=False):
            try:
                return call()
            finally:
                lock.release()
        return await asyncio.to_thread(call)

    async def _waiting(self, call: Callable[[], T]) -> T:
        if self.loci.chat is None:
            return await self._local(call)
        return await asyncio.to_thread(call)

    async def _bulk(self, call: Callable[[], T]) -> T:
        return await asyncio.to_thread(call)

    async def add(self, session: str, role: str, content: str, **metadata: Any) -> Event:
        return await self._local(lambda: self.loci.add(session, role, content, **metadata))

    async def add_event(self, session: str, **fields: Any) -> Event:
        return await self._local(lambda: self.loci.add_event(session, **fields))

    async def add_events(self, session: str, events: Sequence[dict[str, Any]]) -> list[Event]:
        return await self._local(lambda: self.loci.add_events(session, events))

    async def add_reply(
        self, session: str, text: str, **metadata: Any
    ) -> tuple[Event, ReplyResult]:
        return await self._waiting(lambda: self.loci.add_reply(session, text, **metadata))

    async def apply_reply(self, text: str, source: str | None = None) -> ReplyResult:
        return await self._local(lambda: self.loci.apply_reply(text, source))

    async def compact(
        self,
        session: str,
        *,
        instructions: str | None = None,
        dry_run: bool = False,
        strategy: str = "full",
        model: str | None = None,
        window: int | None = None,
    ) -> CompactionResult:
        return await self._waiting(
            lambda: self.loci.compact(
                session, instructions=instructions, dry_run=dry_run, strategy=strategy,
                model=model, window=window,
            )
        )

    async def compactions(self, session: str) -> list[Compaction]:
        return await self._local(lambda: self.loci.compactions(session))

    async def compile(
        self,
        session: str | None,
        message: str | None = None,
        *,
        model: str | None = None,
        window: int | None = None,
        guest: bool = False,
        provider_edits: Sequence[str] | None = None,
    ) -> CompiledContext:
        return await self._waiting(
            lambda: self.loci.compile(
                session,
                message,
                model=model,
                window=window,
                guest=guest,
                provider_edits=provider_edits,
            )
        )

    async def end_session(self, session: str) -> SessionKnowledge:
        return await self._waiting(lambda: self.loci.end_session(session))

    async def erase_session(
        self, session: str, *, keep_derived: bool = False, dry_run: bool = False
    ) -> SessionErasure:
        return await self._local(
            lambda: self.loci.erase_session(session, keep_derived=keep_derived, dry_run=dry_run)
        )

    async def events(self, session: str, *, include_archived: bool = True) -> list[Event]:
        return await self._local(
            lambda: self.loci.events(session, include_archived=include_archived)
        )

    async def export_jsonl(self, session: str) -> list[str]:
        return await self._bulk(lambda: list(self.loci.export_jsonl(session)))

    async def extract_memories(
        self, events: Sequence[Event], extractor: Extractor | None = None, *, save: bool = True
    ) -> list[SaveResult]:
        return await self._waiting(lambda: self.loci.extract_memories(events, extractor, save=save))

    async def forget(self, memory_id: str, *, redact_source: bool = False) -> int:
        return await self._local(lambda: self.loci.forget(memory_id, redact_source=redact_source))

    async def import_jsonl(self, lines: Iterable[str], session: str) -> list[Event]:
        return await self._bulk(lambda: self.loci.import_jsonl(lines, session))

    async def import_log(self, format: str, path: str, *, session: str | None = None
                         ) -> ImportReport:
        return await self._bulk(lambda: self.loci.import_log(format, path, session=session))

    async def maybe_compact(
        self, session: str, *, model: str | None = None
    ) -> CompactionResult | None:
        return await self._waiting(lambda: self.loci.maybe_compact(session, model=model))

    async def memories(
        self, type: str | None = None, *, include_expired: bool = False, expired_only: bool = False
    ) -> list[Memory]:
        return await self._local(
            lambda: self.loci.memories(
                type, include_expired=include_expired, expired_only=expired_only
            )
        )

    async def memory(self, memory_id: str) -> Memory:
        return await self._local(lambda: self.loci.memory(memory_id))

    async def memory_history(self, memory_id: str) -> list[MemoryVersion]:
        return await self._local(lambda: self.loci.memory_history(memory_id))

    async def memory_read(self, memory_id: str, offset: int = 0, limit: int = 1000) -> MemoryPage:
        return await self._local(lambda: self.loci.memory_read(memory_id, offset, limit))

    async def memory_search(
        self, query: str, limit: int = 5, filters: SearchFilters | None = None,
        past: bool | None = None,
    ) -> list[MemorySummary]:
        return await self._local(lambda: self.loci.memory_search(query, limit, filters, past))

    async def memory_write(
        self, type: str, tags: Sequence[str], content: str, id: str | None = None
    ) -> Memory:
        return await self._local(lambda: self.loci.memory_write(type, tags, content, id))

    async def purge_expired(self) -> int:
        return await self._local(lambda: self.loci.purge_expired())

    async def read_document(self, path: str, offset: int = 0, limit: int = 10000) -> DocumentPage:
        return await self._local(lambda: self.loci.read_document(path, offset, limit))

    async def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        return await self._bulk(lambda: self.loci.reindex(progress))

    async def remember(
        self,
        content: str,
        type: str = "project_context",
        tags: Sequence[str] = (),
        source: str | None = None,
        *,
        dedupe: bool = True,
    ) -> Memory:
        return await self._local(
            lambda: self.loci.remember(content, type, tags, source, dedupe=dedupe)
        )

    async def reply(self, turn: Turn, answer: Any) -> ReplyResult:
        return await self._waiting(lambda: self.loci.reply(turn, answer))

    async def search(
        self,
        query: str,
        limit: int = 10,
        *,
        kinds: Sequence[str] = ("memory",),
        filters: SearchFilters | None = None,
        past: bool | None = None,
    ) -> list[SearchHit]:
        return await self._local(
            lambda: self.loci.search(query, limit, kinds=kinds, filters=filters, past=past)
        )

    async def search_conversation(
        self, query: str, session: str | None = None, limit: int = 10
    ) -> list[SearchHit]:
        return await self._local(lambda: self.loci.search_conversation(query, session, limit))

    async def search_knowledge(
        self,
        query: str,
        path_filter: str | None = None,
        tags: Sequence[str] | None = None,
        top_k: int = 5,
    ) -> list[DocumentSummary]:
        return await self._local(
            lambda: self.loci.search_knowledge(query, path_filter, tags, top_k)
        )

    async def session(self, session: str) -> SessionInfo:
        return await self._local(lambda: self.loci.session(session))

    async def sessions(self) -> list[SessionInfo]:
        return await self._local(lambda: self.loci.sessions())

    async def set_focus(self, session: str, focus: Focus | None) -> None:
        return await self._local(lambda: self.loci.set_focus(session, focus))

    async def state(self) -> list[StateItem]:
        return await self._local(lambda: self.loci.state())

    async def state_delete(self, key: str) -> None:
        return await self._local(lambda: self.loci.state_delete(key))

    async def state_get(self, key: str) -> StateItem:
        return await self._local(lambda: self.loci.state_get(key))

    async def state_set(self, key: str, value: str) -> StateItem:
        return await self._local(lambda: self.loci.state_set(key, value))

    async def sync(self, *, dry_run: bool = False, confirm: bool = False) -> SyncReport:
        return await self._local(lambda: self.loci.sync(dry_run=dry_run, confirm=confirm))

    async def restore(self, memory_id: str) -> Memory:
        return await self._local(lambda: self.loci.restore(memory_id))

    async def consolidate(self) -> Proposal:
        return await self._local(lambda: self.loci.consolidate())

    async def apply_consolidation(self, proposal_id: str) -> Consolidation:
        return await self._local(lambda: self.loci.apply_consolidation(proposal_id))

    async def consolidation(self) -> Proposal | None:
        return await self._local(lambda: self.loci.consolidation())

    async def turn(
        self,
        session: str,
        messages: Any,
        *,
        api: str = "openai",
        model: str | None = None,
        window: int | None = None,
        system: Any = None,
        guest: bool | None = None,
        thinking: bool = False,
    ) -> Turn:
        return await self._waiting(
            lambda: self.loci.turn(
                session,
                messages,
                api=api,
                model=model,
                window=window,
                system=system,
                guest=guest,
                thinking=thinking,
            )
        )
