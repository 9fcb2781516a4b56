"""Compaction for the facade: builds the compactor from settings and applies the
policy (after a reply, before a compile, when idle)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property

from loci.apis.turn import CLEARS_TOOLS, COMPACTS
from loci.checks import check_label
from loci.compaction.compactor import STRATEGIES, CompactionResult, Compactor
from loci.compaction.policy import COMPACTING, Decision, decide
from loci.compaction.summarize import COMPACTION_PROMPT, ChatSummarizer, Summarizer
from loci.context.layers import PRESERVE_SHARE, SUMMARY_SHARE, configure, history_budget
from loci.errors import ValidationError
from loci.llm import is_offline, make_chat_model
from loci.llm.base import ChatModel
from loci.models import Event, Scope, StateItem
from loci.settings import Settings
from loci.store.base import Store
from loci.text import ExtractiveSummarizer
from loci.timeutil import Clock
from loci.tokens import context_window, token_counter

#: State keys marking how far a session's events were flushed to memory.
FLUSHED_PREFIX = "flushed:"
#: State keys holding the context edits a session's provider applies (``note_edits``).
EDITS_PREFIX = "provider_edits:"


def chat_model_from(settings: Settings) -> ChatModel | None:
    """The configured chat model, or None for the offline default (compaction then
    summarizes with the extractive summarizer, extraction with its rules)."""
    if is_offline(settings.llm.provider):
        return None
    return make_chat_model(settings.llm.provider, model=settings.llm.model,
                           base_url=settings.llm.base_url, api_key=settings.llm.api_key)


class CompactionService:
    def __init__(
        self, store: Store, scope: Scope, settings: Settings, clock: Clock,
        flush: Callable[[Sequence[Event]], int], chat: ChatModel | None,
    ) -> None:
        self.store, self.scope, self.settings, self.clock = store, scope, settings, clock
        self.policy = settings.compaction
        self.flush = flush
        self.summarizer: Summarizer = (
            ChatSummarizer(chat, settings.compaction.prompt or COMPACTION_PROMPT)
            if chat is not None else ExtractiveSummarizer(model=settings.model)
        )

    @cached_property
    def _sections(self) -> dict[str, float]:
        """Section budgets from settings (read once: every compile asks for the budget)."""
        return configure(self.settings.context.layers, self.settings.context.budgets)[1]

    def window(self, model: str | None = None, window: int | None = None) -> int:
        """The context window of a call: ``window`` if given, else the model's."""
        return window or context_window(model or self.settings.model, self.settings.models)

    def history_budget(self, model: str | None = None, window: int | None = None) -> int:
        """The history budget of a compile for ``model`` (``layers.history_budget``)."""
        size = self.window(model, window)
        return history_budget(size, int(size * self.settings.context.target), self._sections)

    def compact(
        self, session: str, *, model: str | None = None, strategy: str = "full",
        instructions: str | None = None, dry_run: bool = False, window: int | None = None,
    ) -> CompactionResult:
        if strategy not in STRATEGIES:
            raise ValidationError(f"unknown strategy {strategy!r}; use one of {STRATEGIES}")
        model = model or self.settings.model
        history = self.history_budget(model, window)
        compactor = Compactor(
            self.store, self.scope, token_counter(model, self.settings.tokenizer),
            self.policy, self.summarizer, self.clock, self.flush,
            summary_tokens=min(self.settings.compaction.summary_tokens,
                               int(history * SUMMARY_SHARE)),
            preserve_cap=int(history * PRESERVE_SHARE),
        )
        edits = self.edits(session)
        return compactor.compact(
            session, self.window(model, window), strategy=strategy,
            instructions=instructions, dry_run=dry_run,
            mask_tools=not any(e.startswith(CLEARS_TOOLS) for e in edits),
            provider_compacts=any(e.startswith(COMPACTS) for e in edits))

    def edits(self, session: str, state: Sequence[StateItem] | None = None
              ) -> tuple[str, ...]:
        """The context edits the provider applies to ``session``'s calls (noted by the
        proxy from the client's requests); found in ``state``, the scope's state items,
        when the caller has read them."""
        key = EDITS_PREFIX + session
        noted = (self.store.get_state(self.scope, key) if state is None
                 else next((item for item in state if item.key == key), None))
        return tuple(noted.value.split()) if noted else ()

    def note_edits(self, session: str, edits: Sequence[str]) -> None:
        """Remember the edits of the session's latest request; with Anthropic's
        ``clear_tool_uses_*`` the provider clears old tool results, so Loci's compactions
        of the session leave them whole rather than mask them a second time."""
        edits = [check_label("provider edit", edit) for edit in edits]
        if tuple(edits) == self.edits(session):
            return
        if edits:
            self.store.set_state(self.scope, EDITS_PREFIX + session, " ".join(edits),
                                 self.clock())
        else:
            self.store.delete_state(self.scope, EDITS_PREFIX + session)

    def decide(self, session: str, *, model: str | None = None,
               before_compile: bool = False, window: int | None = None) -> Decision:
        activity = self.store.session_activity(self.scope, session)
        if activity is None:
            return Decision.NONE
        tokens, last = activity
        idle = (self.clock() - last).total_seconds()
        decision = decide(self.policy, tokens, self.window(model, window), idle_seconds=idle,
                                      before_compile=before_compile)
        if decision is Decision.NONE and self.policy.auto and (
                tokens > self.history_budget(model, window)):
            # Compact (and summarize) rather than let the compiler drop turns.
            return Decision.EMERGENCY if before_compile else Decision.COMPACT
        return decision

    def maybe_compact(
        self, session: str, *, model: str | None = None, before_compile: bool = False,
        window: int | None = None,
    ) -> tuple[Decision, CompactionResult | None]:
        """Compact if the policy says so: a full compaction at the thresholds, masking
        first when idle (sleep-time), and a memory flush when auto-compaction is off."""
        decision = self.decide(session, model=model, before_compile=before_compile,
                               window=window)
        if decision in COMPACTING:
            strategy = "auto" if decision is Decision.SLEEP else "full"
            return decision, self.compact(session, model=model, strategy=strategy,
                                          window=window)
        if decision is Decision.FLUSH and not before_compile:
            self._flush_new(session)
        return decision, None

    def _flush_new(self, session: str) -> None:
        """Save facts from the events not flushed yet (the mark lives in state)."""
        key = f"{FLUSHED_PREFIX}{session}"
        mark = self.store.get_state(self.scope, key)
        after = int(mark.value) if mark else 0
        events = self.store.list_events(self.scope, session, include_archived=False,
                                        after_id=after)
        if events:
            self.flush(events)
            self.store.set_state(self.scope, key, str(events[-1].id), self.clock())
