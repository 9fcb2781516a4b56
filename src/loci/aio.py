"""``AsyncLoci``: the surface of :class:`~loci.Loci` for asyncio programs.

Each method is a coroutine derived from ``Loci``'s method of the same name (its
signature and docstring), run where its waiting is; the table in the class says where:

- ``_local``: a call that reads, writes and computes only in this process (a SQLite
  store, an in-process embedder or none) runs right on the event loop when the store is
  free: a thread would cost more than the call and gain nothing, since the store's one
  connection and the GIL serialize the work anyway. Otherwise (PostgreSQL, an embedding
  API, the store busy in another thread) it runs in a worker thread, so that the loop
  serves other tasks while it waits.
- ``_waiting``: a call that may wait on the chat model (compaction's summary,
  extraction, the librarian) runs in a worker thread when a chat model is configured;
  without one it is a local call.
- ``_bulk``: bulk work, and waiting on background work, always runs in a thread.

A new ``Loci`` operation gets its coroutine from one line in that table (a test fails
until it has one, or is named in ``SYNC_ONLY``). ``knowledge`` and ``usage`` are the
view's services as they are (their calls only touch the store); ``loci`` is the
:class:`Loci` underneath, for anything else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from functools import update_wrapper
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from loci.knowledge import KnowledgeBase
from loci.runtime import Loci
from loci.timeutil import Clock, utc_now
from loci.usage import UsageLedger

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: ``Loci``'s public methods that ``AsyncLoci`` lacks: the server's way to keep a compile
#: on its loop (``AsyncLoci.compile`` decides where to run itself).
SYNC_ONLY = frozenset({"compile_unless_compacting"})

Runner = Callable[["AsyncLoci", Callable[[], R]], Awaitable[R]]


def _coroutine(method: Callable[Concatenate[Loci, P], R], runner: Runner[R]
               ) -> Callable[Concatenate[AsyncLoci, P], Coroutine[Any, Any, R]]:
    """``method`` of the ``Loci`` under an ``AsyncLoci``, run by ``runner``."""

    async def call(self: AsyncLoci, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await runner(self, lambda: method(self.loci, *args, **kwargs))

    return _named(call, method)


def _plain(method: Callable[Concatenate[Loci, P], R]) -> Callable[Concatenate[AsyncLoci, P], R]:
    """``method`` of the ``Loci`` under an ``AsyncLoci``, called as it is (it computes)."""

    def call(self: AsyncLoci, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(self.loci, *args, **kwargs)

    return _named(call, method)


def _named(call: F, method: Callable[..., Any]) -> F:
    """``call`` with ``method``'s name, docstring and annotations (``__wrapped__``: what
    ``inspect.signature`` and ``typing.get_type_hints`` read)."""
    update_wrapper(call, method)
    call.__module__, call.__qualname__ = __name__, f"AsyncLoci.{method.__name__}"
    return call


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

    async def export_jsonl(self, session: str) -> list[str]:
        """``Loci.export_jsonl``'s lines, all written in a thread."""
        return await self._bulk(lambda: list(self.loci.export_jsonl(session)))

    # -- where each of Loci's methods runs --------------------------------------------
    workspace = _plain(Loci.workspace)
    history_budget = _plain(Loci.history_budget)

    add = _coroutine(Loci.add, _local)
    add_event = _coroutine(Loci.add_event, _local)
    add_events = _coroutine(Loci.add_events, _local)
    apply_consolidation = _coroutine(Loci.apply_consolidation, _local)
    apply_reply = _coroutine(Loci.apply_reply, _local)
    compactions = _coroutine(Loci.compactions, _local)
    consolidate = _coroutine(Loci.consolidate, _local)
    consolidation = _coroutine(Loci.consolidation, _local)
    erase_session = _coroutine(Loci.erase_session, _local)
    events = _coroutine(Loci.events, _local)
    forget = _coroutine(Loci.forget, _local)
    memories = _coroutine(Loci.memories, _local)
    memory = _coroutine(Loci.memory, _local)
    memory_history = _coroutine(Loci.memory_history, _local)
    memory_read = _coroutine(Loci.memory_read, _local)
    memory_search = _coroutine(Loci.memory_search, _local)
    memory_write = _coroutine(Loci.memory_write, _local)
    misspelt_type = _coroutine(Loci.misspelt_type, _local)
    purge_expired = _coroutine(Loci.purge_expired, _local)
    read_document = _coroutine(Loci.read_document, _local)
    remember = _coroutine(Loci.remember, _local)
    restore = _coroutine(Loci.restore, _local)
    search = _coroutine(Loci.search, _local)
    search_conversation = _coroutine(Loci.search_conversation, _local)
    search_knowledge = _coroutine(Loci.search_knowledge, _local)
    session = _coroutine(Loci.session, _local)
    sessions = _coroutine(Loci.sessions, _local)
    set_focus = _coroutine(Loci.set_focus, _local)
    state = _coroutine(Loci.state, _local)
    state_delete = _coroutine(Loci.state_delete, _local)
    state_get = _coroutine(Loci.state_get, _local)
    state_set = _coroutine(Loci.state_set, _local)
    sync = _coroutine(Loci.sync, _local)

    add_reply = _coroutine(Loci.add_reply, _waiting)
    compact = _coroutine(Loci.compact, _waiting)
    compile = _coroutine(Loci.compile, _waiting)
    end_session = _coroutine(Loci.end_session, _waiting)
    extract_memories = _coroutine(Loci.extract_memories, _waiting)
    maybe_compact = _coroutine(Loci.maybe_compact, _waiting)
    reply = _coroutine(Loci.reply, _waiting)
    turn = _coroutine(Loci.turn, _waiting)

    close = _coroutine(Loci.close, _bulk)  # it joins background work
    import_jsonl = _coroutine(Loci.import_jsonl, _bulk)
    import_log = _coroutine(Loci.import_log, _bulk)
    reindex = _coroutine(Loci.reindex, _bulk)
    wait_extracted = _coroutine(Loci.wait_extracted, _bulk)  # the work needs the store
    wait_indexed = _coroutine(Loci.wait_indexed, _bulk)
