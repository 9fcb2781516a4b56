"""Compaction of one session: mask old tool outputs, flush facts to memory, summarize
the oldest span, archive it and index the summary, atomically.

The span is always whole steps (``context.history``: a message, or tool calls with
their results), so a tool call and its result are archived or kept together and
compacted history stays valid input for the OpenAI and Anthropic APIs; a sixty-step
tool loop compacts like sixty turns. The user message that opened the first preserved step's
turn (the agent's task) stays live, and history pins it. Nothing is deleted: archived events
stay searchable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from loci.compaction.masking import Mask, plan_masks
from loci.compaction.policy import preserve_tokens
from loci.compaction.summarize import Summarizer
from loci.context.history import group_steps, turn_opener
from loci.context.render import since_provider_compaction
from loci.errors import ConflictError
from loci.eventlog import new_event
from loci.models import SUMMARY_HEADER, Compaction, Document, Event, NewEvent, Scope
from loci.settings import CompactionSettings
from loci.store.base import CompactionPlan, NewCompaction, Store
from loci.text.trail import TRAIL_KEY, span_trail
from loci.timeutil import Clock, format_timestamp
from loci.tokens import TokenCounter

STRATEGIES = ("full", "mask", "auto")

Flush = Callable[[Sequence[Event]], int]


@dataclass(frozen=True)
class CompactionResult:
    session: str
    strategy: str
    tokens_before: int
    tokens_after: int
    masked: int
    archived: int
    memories_saved: int
    summary: str
    dry_run: bool = False
    record: Compaction | None = None
    artifacts: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.masked or self.archived)


class Compactor:
    def __init__(
        self, store: Store, scope: Scope, counter: TokenCounter, policy: CompactionSettings,
        summarizer: Summarizer, clock: Clock, flush: Flush | None = None,
        summary_tokens: int = 1_500, preserve_cap: int | None = None,
    ) -> None:
        self.store, self.scope, self.counter, self.policy = store, scope, counter, policy
        self.summarizer, self.clock, self.flush = summarizer, clock, flush
        self.summary_tokens = summary_tokens
        #: At most this many tokens are preserved, so compaction always makes room.
        self.preserve_cap = preserve_cap

    def compact(
        self, session: str, window: int, *, strategy: str = "full",
        instructions: str | None = None, dry_run: bool = False, mask_tools: bool = True,
        provider_compacts: bool = False,
    ) -> CompactionResult:
        """Compact ``session``; ``mask_tools`` False leaves tool outputs whole (the
        provider clears them), ``provider_compacts`` leaves what the provider's latest
        compaction stands for alone."""
        # Read before the events: a compaction committed between the two reads makes
        # the plan's basis stale, and applying it is refused rather than doubled.
        done = self.store.list_compactions(self.scope, session)
        live = self.store.list_events(self.scope, session, include_archived=False)
        if provider_compacts:
            live = since_provider_compaction(live)
        summaries = [e for e in live if e.type == "summary"]
        old, recent = self._split([e for e in live if e.type != "summary"], window)
        masks = plan_masks(old, recent, session, self.policy.mask_chars,
                           self.policy.artifact_chars) if mask_tools else []
        by_id = {m.event_id: m for m in masks}
        before = sum(e.tokens for e in live)
        masked_tokens = {m.event_id: self.counter.count_message("tool", m.text) for m in masks}
        after_masking = sum(masked_tokens.get(e.id, e.tokens) for e in live)
        summarize = bool(old) and (strategy == "full" or (
            strategy == "auto" and after_masking > self.policy.sleep * window))
        summary_text, saved = "", 0
        plan_summary: NewEvent | None = None
        archive: tuple[int, ...] = ()
        after = after_masking
        if summarize:
            if self.flush is not None and not dry_run:
                saved = self.flush(old)
            previous = summaries[-1].content.removeprefix(SUMMARY_HEADER).strip() if (
                summaries) else None
            summary_text = self.summarizer.summarize(old, previous, instructions,
                                                     self.summary_tokens)
            trail = span_trail(old, _trail_of(summaries[-1]) if summaries else "")
            plan_summary = self._summary_event(summary_text, old, before,
                                               trail.render(None) if trail else "")
            archive = tuple(e.id for e in (*summaries, *old))
            after = sum(masked_tokens.get(e.id, e.tokens) for e in recent) + plan_summary.tokens
        span = old or recent
        record = NewCompaction(
            session=session, strategy="summary" if summarize else "mask",
            first_event_id=span[0].id if span else 0, last_event_id=span[-1].id if span else 0,
            summary_event_id=None, summary=summary_text, tokens_before=before,
            tokens_after=after, created_at=self.clock(),
        )
        result = CompactionResult(
            session=session, strategy=record.strategy, tokens_before=before,
            tokens_after=after, masked=len(masks), archived=len(archive),
            memories_saved=saved, summary=summary_text, dry_run=dry_run,
            artifacts=[m.artifact_path for m in masks if m.artifact_path],
        )
        if dry_run or not (masks or archive):
            return result
        plan = CompactionPlan(
            compaction=record,
            masks={i: (m.text, masked_tokens[i]) for i, m in by_id.items()},
            artifacts=self._artifacts(masks, live, session), archive_ids=archive,
            summary=plan_summary, after_compaction=done[-1].id if done else 0,
        )
        try:
            _, stored = self.store.apply_compaction(self.scope, session, plan)
        except ConflictError:  # another process compacted this span first: nothing to do
            return replace(result, tokens_after=before, masked=0, archived=0, summary="",
                           artifacts=[])
        return replace(result, record=stored)

    def _split(self, events: Sequence[Event], window: int) -> tuple[list[Event], list[Event]]:
        """(span to compact, preserved events): the preserve window keeps the last
        ``preserve_messages`` steps or ``preserve_share`` of the window, whichever is
        larger, in whole steps, within the preserve cap, with the message that opened
        their turn."""
        steps = group_steps(events)
        keep_tokens = preserve_tokens(self.policy, window)
        cap = self.preserve_cap if self.preserve_cap is not None else window
        kept_steps = kept_tokens = 0
        start = len(steps)
        while start > 0 and (kept_steps < self.policy.preserve_messages
                             or kept_tokens < keep_tokens):
            size = sum(e.tokens for e in steps[start - 1])
            if kept_tokens + size > cap and start < len(steps):
                break
            start -= 1
            kept_steps += 1
            kept_tokens += size
        old = [e for step in steps[:start] for e in step]
        recent = [e for step in steps[start:] for e in step]
        opener = turn_opener(steps, start)
        if opener is not None:  # what the preserved steps answer stays live
            old.remove(opener)
            recent.insert(0, opener)
        return old, recent

    def _summary_event(self, text: str, span: Sequence[Event], before: int,
                       trail: str) -> NewEvent:
        content = f"{SUMMARY_HEADER}\n{text}"
        # The whole trail rides along: the summary shows what fits its budget, the
        # compiler what else fits the call's (``earlier_trail``), and the next
        # compaction continues it rather than a cut copy.
        kept = {TRAIL_KEY: trail} if trail else {}
        return new_event(
            self.counter, type="summary", role="system", content=content,
            timestamp=self.clock(), metadata={
                "type": "compaction",
                "compacted_count": len(span),
                "compacted_at": format_timestamp(self.clock()),
                "original_token_count": sum(e.tokens for e in span),
                "summary_token_count": self.counter.count(content),
                "tokens_before": before,
                **kept,
            },
        )

    def _artifacts(
        self, masks: Sequence[Mask], events: Sequence[Event], session: str
    ) -> tuple[Document, ...]:
        content = {e.id: e for e in events}
        now = self.clock()
        return tuple(
            Document(m.artifact_path, content[m.event_id].content, ("artifact",), 1, now, now,
                     {"session": session, "event_id": m.event_id})
            for m in masks if m.artifact_path
        )


def _trail_of(summary: Event) -> str:
    """The trail a summary event carries (a summary written before the trail was kept
    whole: the part its text shows)."""
    kept = summary.metadata.get(TRAIL_KEY)
    return kept if isinstance(kept, str) else summary.content
