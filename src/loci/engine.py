"""``ScopeView``: the operations of a ``Loci``, the view of one scope of a runtime.

A view (user → agent) of the parts a runtime holds (``RuntimeParts``: the store, the
models, the configuration). It validates input (through ``loci.checks``), stamps time
from an injectable clock, counts tokens once on write, and delegates storage to the store
and prompt assembly to the context compiler. It builds no runtime: ``loci.runtime``
does, and its ``Loci`` adds the ways to open one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from functools import cached_property, partial
from typing import Any, ClassVar, Protocol

from loci.apis import client
from loci.checks import (
    check_call,
    check_filters,
    check_name,
    check_state_key,
    check_stored_name,
    check_text,
    check_timeout,
    check_type,
)
from loci.compaction.compactor import STRATEGIES, CompactionResult
from loci.compaction.policy import COMPACTING, Decision
from loci.compaction.service import CompactionService
from loci.context.assembly import Sources, compile_for
from loci.context.compiled import CompiledContext
from loci.context.focus import Focus, save_focus
from loci.context.history import LiveEvents
from loci.context.workspace import Workspace
from loci.erasure import SessionEraser, SessionErasure
from loci.errors import NotFoundError, ValidationError
from loci.eventlog import check_fields, check_message, dump_jsonl, new_event, not_held, parse_jsonl
from loci.importers import FORMATS, ImportReport, import_log
from loci.indexing import Indexer
from loci.knowledge import DocumentPage, DocumentSummary, KnowledgeBase, Librarian, SessionKnowledge
from loci.llm.base import ChatModel
from loci.memory.extract import Extractor, LLMExtractor, RuleExtractor
from loci.memory.live import Job, TurnExtraction, extract_turns, extracted_from, worth_reading
from loci.memory.mirror import Mirror
from loci.memory.review import Consolidation, Consolidator, Proposal
from loci.memory.scopes import AgentMemories, list_memories, memory_scopes, search_items
from loci.memory.service import MemoryService, ReplyResult, SaveResult
from loci.memory.sync import SyncReport
from loci.memory.sync import sync as sync_mirror
from loci.memory.tools import MemoryPage, MemorySummary, page, to_summary
from loci.memory.types import typo_of
from loci.models import (
    Compaction,
    Event,
    Memory,
    MemoryVersion,
    NewEvent,
    Scope,
    SearchHit,
    SessionInfo,
    StateItem,
)
from loci.retriever import Retriever
from loci.search.relevance import MIN_RELEVANCE
from loci.settings import Settings
from loci.store import NO_FILTERS, SearchFilters, Store
from loci.timeutil import Clock
from loci.tokens import TokenCounter, token_counter
from loci.turns import Turn, answer_turn, take_in
from loci.usage import UsageLedger


class RuntimeParts(Protocol):
    """What a view uses of its runtime (``loci.runtime.Runtime`` holds them all)."""

    settings: Settings
    store: Store
    clock: Clock
    indexer: Indexer | None
    retriever: Retriever
    chat: ChatModel | None
    live_events: LiveEvents
    extraction: TurnExtraction


class ScopeView:
    """Context and memory for one user's agent: the operations of a ``Loci``."""

    #: What ``compact(strategy=...)`` and ``import_log(format, ...)`` accept.
    COMPACTION_STRATEGIES: ClassVar[tuple[str, ...]] = STRATEGIES
    LOG_FORMATS: ClassVar[tuple[str, ...]] = tuple(FORMATS)

    def __init__(self, runtime: RuntimeParts, user: str | None = None,
                 agent: str | None = None, clock: Clock | None = None) -> None:
        """The view of ``user``'s ``agent`` (the settings' by default) of ``runtime``."""
        self.runtime = runtime
        base = runtime.settings
        self.settings = base.with_overrides(user=user, agent=agent) if user or agent else base
        self.scope = Scope(check_name("user", self.settings.user),
                           check_name("agent", self.settings.agent))
        #: Where this agent's memories are read, the one written to first (its own, or
        #: its user's shared ones too: ``memory.scopes``).
        self.memory_scopes = memory_scopes(self.scope, self.settings.memory_scope)
        self.store = runtime.store
        self.clock = clock or runtime.clock
        self.indexer = runtime.indexer
        self.retriever = runtime.retriever
        self.chat = runtime.chat

    # Services are built on first use, so that a view costs nothing until it works; they
    # read the time through the view, so a clock set later is theirs too.
    @cached_property
    def counter(self) -> TokenCounter:
        """The token counter of the view's model (its encoding loads on first use)."""
        return token_counter(self.settings.model, self.settings.tokenizer)

    @cached_property
    def knowledge(self) -> KnowledgeBase:
        return KnowledgeBase(self.store, self.scope, self.retriever, self.indexer, self._now)

    @cached_property
    def usage(self) -> UsageLedger:
        return UsageLedger(self.store, self.scope, self.settings, self._now)

    @cached_property
    def _compaction(self) -> CompactionService:
        return CompactionService(self.store, self.scope, self.settings, self._now,
                                 lambda events: len(self._consolidate(events)), self.chat)

    @cached_property
    def _agent_memories(self) -> AgentMemories:
        mirror = self.settings.memory_mirror
        return AgentMemories(self.store, self.memory_scopes, lambda scope: MemoryService(
            self.store, scope, self.indexer, self._now, self.settings.memory_types,
            Mirror(self.settings.memory_root, scope, self.store) if mirror else None,
            self.scope))

    @property
    def _memories(self) -> MemoryService:
        """The memories this agent writes (``memory_scopes[0]``)."""
        return self._agent_memories.written

    def _holding(self, memory_id: str) -> MemoryService:
        return self._agent_memories.holding(check_text("memory id", memory_id))

    def _now(self) -> datetime:
        return self.clock()

    # -- sessions and events ------------------------------------------------------
    def add(self, /, session: str, role: str, content: str, **metadata: Any) -> Event:
        """Append a chat message to a session's log (a user's must hold text)."""
        return self.add_event(session, type="message", role=role,
                              content=check_message(role, content), metadata=metadata)

    def add_event(self, /, session: str, **fields: Any) -> Event:
        """Append one event (``type``, ``role``, ``content``, ``tool_name``, ...)."""
        return self.add_events(session, [fields])[0]

    def add_events(self, session: str, events: Sequence[dict[str, Any]]) -> list[Event]:
        """Append several events atomically: all are validated before any is stored."""
        check_name("session", session)
        now = self.clock()
        for fields in events:
            check_fields(fields)
        batch = [new_event(self.counter, **{"timestamp": now, "stamped": "timestamp" not in fields,
                                            **fields}) for fields in events]
        added = self._append(session, batch)
        if self.settings.memory_extraction and (said := worth_reading(added)):
            self.runtime.extraction.submit(Job(partial(extract_turns, self._memories, said,
                                                       self.chat), self.chat is not None,
                                               self.scope.tenant))
        return added

    def events(self, session: str, *, include_archived: bool = True) -> list[Event]:
        self.session(session)
        return self.store.list_events(self.scope, session, include_archived=include_archived)

    def session(self, session: str) -> SessionInfo:
        info = self.store.session_info(self.scope, check_stored_name("session", session))
        if info is None:
            raise NotFoundError(f"no session {session!r} for user {self.scope.tenant!r}")
        return info

    def sessions(self) -> list[SessionInfo]:
        return self.store.list_sessions(self.scope)

    def import_jsonl(self, lines: str | Iterable[str], session: str) -> list[Event]:
        """Import a JSONL log (its text or lines) into ``session``; a bad line stores none,
        and events the session holds already (same time, kind and text) are skipped."""
        held = self.store.list_events(self.scope, check_name("session", session))
        return self._append(session, not_held(parse_jsonl(lines, self.counter, self.clock()), held))

    def _append(self, session: str, events: Sequence[NewEvent]) -> list[Event]:
        added = self.store.append_events(self.scope, session, events)
        if self.indexer is not None:  # the vectors follow in the background
            self.indexer.embed_later()
        return added

    def import_log(self, format: str, path: str, *, session: str | None = None
                   ) -> ImportReport:
        """Import an agent's own logs (``loci.importers``), each event once."""
        return import_log(self, format, path, session)

    def export_jsonl(self, session: str) -> Iterator[str]:
        return dump_jsonl(self.events(session))

    def erase_session(self, session: str, *, keep_derived: bool = False,
                      dry_run: bool = False) -> SessionErasure:
        """Erase a session and, unless ``keep_derived``, what was derived from it."""
        eraser = SessionEraser(self.store, self.scope, self.memory_scopes, self._holding,
                               self.knowledge, self.runtime.live_events)
        return eraser.erase(check_text("session", session), keep_derived=keep_derived,
                            dry_run=dry_run)

    # -- memories -----------------------------------------------------------------
    def remember(
        self, content: str, type: str = "project_context", tags: Sequence[str] = (),
        source: str | None = None, *, dedupe: bool = True,
    ) -> Memory:
        """Store a typed fact; its expiry follows from its type. The same fact stored
        again refreshes it; a changed version supersedes it (see ``memory_history``)."""
        return self._memories.save(content, type, tags, source, dedupe=dedupe).memory

    def misspelt_type(self, type: str) -> str | None:
        """The built-in or configured memory type that an unknown ``type`` most likely
        misspells (``stiky``: ``sticky``), or None."""
        return typo_of(check_type(type), self.settings.memory_types)

    def memories(
        self, type: str | None = None, *, include_expired: bool = False,
        expired_only: bool = False,
    ) -> list[Memory]:
        """Memories newest first, with the rules' facts of every turn written so far."""
        self.runtime.extraction.catch_up()
        types = (check_type(type),) if type else ()
        now = None if include_expired and not expired_only else self.clock()
        return list_memories(self.store, self.memory_scopes, types=types, now=now,
                             expired_only=expired_only)

    def memory(self, memory_id: str) -> Memory:
        return self._holding(memory_id).get(memory_id)

    def memory_history(self, memory_id: str) -> list[MemoryVersion]:
        """Earlier versions of a memory, oldest first."""
        return self._holding(memory_id).history(memory_id)

    def forget(self, memory_id: str, *, redact_source: bool = False) -> int:
        """Hard-delete a memory, its history and file; ``redact_source`` also removes
        the tags that wrote it from the raw replies (returns how many)."""
        return self._holding(memory_id).forget(memory_id, redact_source=redact_source)

    def purge_expired(self) -> int:
        """Hard-delete expired memories (the agent's own older ones too); how many."""
        return self._agent_memories.purge_expired()

    def extract_memories(
        self, events: Sequence[Event], extractor: Extractor | None = None, *, save: bool = True
    ) -> list[SaveResult]:
        """Extract lasting facts from ``events`` (offline rules unless an extractor is
        given) and save them with dedup; with ``save=False`` only propose them."""
        return self._memories.extract(events, extractor or RuleExtractor(), save=save)

    def sync(self, *, dry_run: bool = False, confirm: bool = False) -> SyncReport:
        """Apply the markdown mirror's edits (``loci.memory.sync``); ``confirm`` lets
        many deleted files retire their memories; another store's folder: ``ConflictError``."""
        mirror = self._memories.mirror
        if mirror is None:
            raise ValidationError("the markdown mirror is off (memory_mirror = false)")
        return sync_mirror(self._memories, mirror, dry_run=dry_run, confirm=confirm)

    def restore(self, memory_id: str) -> Memory:
        """Bring back a memory that sync or a consolidation retired or superseded."""
        return self._holding(memory_id).restore(memory_id)

    def consolidate(self) -> Proposal:
        """Propose tidying the memories, kept for review (``memory.consolidate``)."""
        return Consolidator(self._memories, self.chat).propose()

    def apply_consolidation(self, proposal_id: str) -> Consolidation:
        """Apply the pending proposal as new versions (``ConflictError`` if stale)."""
        return Consolidator(self._memories, self.chat).apply(check_text("id", proposal_id))

    def consolidation(self) -> Proposal | None:
        """The pending consolidation proposal, if any."""
        return Consolidator(self._memories, self.chat).pending()

    def apply_reply(self, text: str, source: str | None = None) -> ReplyResult:
        """Save a reply's [MEMORY:type] and [STATE:key] tags; the reply without them."""
        return self._memories.apply_reply(text, source)

    def add_reply(self, /, session: str, text: str, **metadata: Any
                  ) -> tuple[Event, ReplyResult]:
        """Append an assistant reply, its tags saved and stripped (the raw reply kept)."""
        check_name("session", session)
        result = self.apply_reply(text, source=f"session:{session}")
        metadata = {**metadata, "raw": text} if result.clean != text else metadata
        event = self.add(session, "assistant", result.clean, **metadata)
        self._compaction.maybe_compact(session)
        return event, result

    def turn(
        self, session: str, messages: Any, *, api: str = "openai", model: str | None = None,
        window: int | None = None, system: Any = None, guest: bool | None = None,
        thinking: bool = False,
    ) -> Turn:
        """The next LLM call of ``session`` from the caller's messages in its ``api``'s
        shape (only what is new is recorded: ``loci.turns``): send ``Turn.request``,
        then the answer to ``reply``. ``guest`` defaults to having a system prompt."""
        session = check_name("session", session)
        intake = take_in(self, session, client.messages(messages, api, system))
        guest = bool(intake.system) if guest is None else guest
        context = self.compile(session, intake.shown, model=model, window=window, guest=guest)
        return Turn(session, api, context, intake, thinking)

    def reply(self, turn: Turn, answer: Any) -> ReplyResult:
        """Record the model's ``answer`` to ``turn`` (text, a message or the SDK's
        result): usage, the message, the answer's tags, tool calls and blocks."""
        return answer_turn(self, turn, answer)

    def search(
        self, query: str, limit: int = 10, *, kinds: Sequence[str] = ("memory",),
        filters: SearchFilters | None = None, past: bool | None = None,
    ) -> list[SearchHit]:
        """Hybrid (keyword + vector) search over the given kinds, best first, scores in
        [0, 1]. Memories that no longer hold are found too: ranked below those that do
        (``timeline.weighed_by_standing``) unless the query asks about the past
        (``past`` None: it decides; True: as they rank), left out if ``past`` is False."""
        self.runtime.extraction.catch_up()  # the facts of every turn written so far
        return search_items(self.retriever, self.memory_scopes, check_text("query", query),
                            kinds, limit, check_filters(filters or NO_FILTERS), past,
                            self.clock())

    def memory_search(
        self, query: str, limit: int = 5, filters: SearchFilters | None = None,
        past: bool | None = None,
    ) -> list[MemorySummary]:
        """The memory tool's search: summaries, ids, relevance, timestamps, status (of
        the memories scoring ``search.relevance.MIN_RELEVANCE`` or more)."""
        hits = self.search(query, limit, filters=filters, past=past)
        return [to_summary(hit, self.clock()) for hit in hits if hit.score >= MIN_RELEVANCE]

    def memory_read(self, memory_id: str, offset: int = 0, limit: int = 1000) -> MemoryPage:
        """The memory tool's read: the memory's markdown, paginated by characters."""
        return page(self.memory(memory_id), offset, limit)

    def memory_write(
        self, type: str, tags: Sequence[str], content: str, id: str | None = None
    ) -> Memory:
        """The memory tool's write: create, or update the memory ``id`` (versioned)."""
        if id is None:
            return self.remember(content, type=type, tags=tags)
        return self._holding(id).update(id, content, type, tags).memory

    def search_conversation(
        self, query: str, session: str | None = None, limit: int = 10
    ) -> list[SearchHit]:
        """Search the event log (archived events included), optionally one session."""
        if session is not None:
            check_stored_name("session", session)
        return self.search(query, limit, kinds=("event",),
                           filters=SearchFilters(session=session))

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Re-embed everything with the configured model; returns the item count."""
        if self.indexer is None:
            raise ValidationError("embeddings are off (embedding_provider = none)")
        return self.indexer.reindex(progress)

    def wait_indexed(self, timeout: float | None = None) -> bool:
        """Block until every row written so far (by any process) has its vectors: writes
        return before that; False if ``timeout`` seconds passed first."""
        return self.indexer is None or self.indexer.wait_indexed(check_timeout(timeout))

    def wait_extracted(self, timeout: float | None = None) -> bool:
        """Block until the facts of the turns written so far are saved (``memory.live``)."""
        return self.runtime.extraction.wait(check_timeout(timeout))

    # -- state --------------------------------------------------------------------
    def state_set(self, key: str, value: str) -> StateItem:
        value = check_text("state value", value if isinstance(value, str) else str(value))
        return self.store.set_state(self.scope, check_state_key(key), value, self.clock())

    def state_get(self, key: str) -> StateItem:
        item = self.store.get_state(self.scope, check_text("key", key))
        if item is None:
            raise NotFoundError(f"no state key {key!r}")
        return item

    def state(self) -> list[StateItem]:
        return self.store.list_state(self.scope)

    def state_delete(self, key: str) -> None:
        if not self.store.delete_state(self.scope, check_text("key", key)):
            raise NotFoundError(f"no state key {key!r}")

    # -- knowledge (documents: see ``self.knowledge``) -------------------------------
    def search_knowledge(
        self, query: str, path_filter: str | None = None, tags: Sequence[str] | None = None,
        top_k: int = 5,
    ) -> list[DocumentSummary]:
        """Document summaries with paths and relevance (``KnowledgeBase``)."""
        return self.knowledge.search_knowledge(query, path_filter, tags, top_k)

    def read_document(self, path: str, offset: int = 0, limit: int = 10_000) -> DocumentPage:
        """A document's latest version, page by page (``KnowledgeBase``)."""
        return self.knowledge.read_document(path, offset, limit)

    def end_session(self, session: str) -> SessionKnowledge:
        """The librarian: file ``session`` into documents and consolidate its memories."""
        librarian = Librarian(self.knowledge, self.chat, self._consolidate)
        return librarian.end_session(session, self.events(session))

    # -- context ------------------------------------------------------------------
    def workspace(self) -> Workspace:
        return Workspace.around(self.settings.workspace, self.settings.home)

    def compile(
        self, session: str | None, message: str | None = None, *, model: str | None = None,
        window: int | None = None, guest: bool = False, provider_edits: Sequence[str] | None = None,
    ) -> CompiledContext:
        """The context for the next LLM call of ``session`` around ``message``, compacted
        first if its policy says so; a ``window`` here sizes this call's view only
        (``context.assembly``); ``guest``: the proxy's (no built-in persona);
        ``provider_edits``: what the provider edits (``CompactionService.note_edits``)."""
        window = check_call(message, window, model)
        decision = Decision.NONE
        if session is not None:
            check_name("session", session)
            if provider_edits is not None:
                self._compaction.note_edits(session, provider_edits)
            if window is None:
                decision, _ = self._compaction.maybe_compact(session, model=model,
                                                            before_compile=True)
        return self._compile(session, message, model, window,
                             flush=decision is Decision.FLUSH, guest=guest)

    def compile_unless_compacting(
        self, session: str, message: str | None = None, *, model: str | None = None,
        window: int | None = None,
    ) -> CompiledContext | None:
        """``compile``, or None when the session must be compacted first. Without
        compaction a compile only reads and computes (the server runs it on its event
        loop); compacting writes and may wait on an LLM."""
        check_name("session", session)
        window = check_call(message, window, model)
        decision = Decision.NONE if window is not None else self._compaction.decide(
            session, model=model, before_compile=True)
        if decision in COMPACTING:
            return None
        return self._compile(session, message, model, window, flush=decision is Decision.FLUSH)

    def _compile(
        self, session: str | None, message: str | None, model: str | None,
        window: int | None, *, flush: bool, guest: bool = False,
    ) -> CompiledContext:
        sources = Sources(self.store, self.scope, self.settings, self.workspace(),
                          self.retriever, self.runtime.live_events, self._compaction.edits)
        return compile_for(sources, session, message, model, window, self.clock(),
                           flush=flush, guest=guest)

    # -- compaction ---------------------------------------------------------------
    def compact(
        self, session: str, *, instructions: str | None = None, dry_run: bool = False,
        strategy: str = "full", model: str | None = None, window: int | None = None,
    ) -> CompactionResult:
        """Compact ``session`` now: mask old tool outputs, save facts to memory,
        summarize and archive the oldest span (nothing is deleted); ``window`` sizes
        what stays live (default: the model's)."""
        self.session(session)
        return self._compaction.compact(session, model=model, strategy=strategy,
                                       instructions=instructions, dry_run=dry_run,
                                       window=check_call(None, window, model))

    def compactions(self, session: str) -> list[Compaction]:
        self.session(session)
        return self.store.list_compactions(self.scope, session)

    def history_budget(self, model: str | None = None, window: int | None = None) -> int:
        """The tokens a compile gives history (summary included) for ``model``, or for a
        ``window`` given per call; compaction keeps live history within it."""
        return self._compaction.history_budget(model, check_call(None, window, model))

    def maybe_compact(self, session: str, *, model: str | None = None
                      ) -> CompactionResult | None:
        """Compact if the policy's thresholds say so (also checks idle sessions)."""
        return self._compaction.maybe_compact(check_name("session", session), model=model)[1]

    def _consolidate(self, events: Sequence[Event]) -> list[SaveResult]:
        if self.settings.memory_extraction:  # each turn's facts were saved as it came
            return extracted_from(self._memories, events, self.runtime.extraction)
        extractor = LLMExtractor(self.chat) if self.chat is not None else None
        return self.extract_memories(events, extractor)

    def set_focus(self, session: str, focus: Focus | None) -> None:
        """Set (or with None, clear) the focus of a goal-driven session."""
        save_focus(self.store, self.scope, check_name("session", session), focus, self.clock())
