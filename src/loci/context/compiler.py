"""The context compiler: what goes into the prompt for one LLM call, under budget.

History is chosen first, within the one history budget that the compaction policy
also uses (``layers.history_budget``): whole steps, the message that opened their turn
pinned (see ``context.history``), dated where the day changes. The compaction summary
takes its tokens from that budget too, shortened to fit, never dropped. The other
sections share what history left: they are processed static → dynamic → retrieved,
and within a section the layers of higher priority first, so when a section's budget
runs out it is the lower-priority layers that lose items. Every layer reports what it
included, what it dropped and why, for the explain view.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import date
from functools import lru_cache

from loci.apis.turn import COMPACTS
from loci.context.compiled import CompiledContext, LayerReport
from loci.context.history import History, choose_history
from loci.context.layers import LayerSpec, history_budget, tokens_for
from loci.context.recall import recall
from loci.context.render import events_to_turn, since_provider_compaction
from loci.context.sources import LAYER_BUILDERS, BuildContext, Item, said
from loci.errors import BudgetExceededError
from loci.memory.dedup import holds
from loci.models import SHARED_KEYS, SUMMARY_HEADER, Event
from loci.timeutil import day_label
from loci.tokens import REPLY_PRIMING, MemoCounts, TokenCounter

#: Dropped items listed one by one before the rest are counted together.
MAX_DROPS_LISTED = 20
#: The explain view warns when a layer uses more than this share of its budget.
NEAR_LIMIT = 0.9
#: Characters of each item's text that the explain view keeps (the inspector shows them).
TEXT_SHOWN = 300
#: After this many compactions of one session, summaries of summaries lose detail.
COMPACTIONS_WARNING = 3
#: A compaction summary is shortened only into at least this room.
MIN_SHRUNK = 40
#: The layer that holds the compaction summary (counted in history's budget).
SUMMARY_LAYER = "compaction_summary"
#: Characters of the texts whose token counts are remembered (per model's counter).
COUNT_CACHE_CHARS = 2_000_000
#: Layers whose budget is a floor, not a ceiling: they take what the others left.
ELASTIC = frozenset({"recall", "earlier_trail"})

#: Each layer's builder: the sources', and recall.
BUILDERS = {**LAYER_BUILDERS, "recall": recall}


@dataclass(frozen=True)
class CompileRequest:
    model: str
    window: int
    budget: int
    layers: Sequence[LayerSpec]
    sections: dict[str, float]
    compactions: int = 0
    #: Context edits the provider applies to this call (``Loci.compile``).
    provider_edits: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summary:
    """The compaction summary's items, its token limit and what it takes from history."""

    items: list[Item]
    limit: int
    cost: int


@lru_cache(maxsize=8)
def memo_counter(counter: TokenCounter) -> TokenCounter:
    """``counter`` with its counts remembered per text. Most items recur from one
    compile to the next (memories, state, workspace files, the rendered sections), and
    exact tokenizing was a fifth of a compile."""
    return TokenCounter(counter.method, MemoCounts(counter.count, COUNT_CACHE_CHARS))


class ContextCompiler:
    def __init__(self, counter: TokenCounter) -> None:
        self.counter = memo_counter(counter)

    def compile(self, ctx: BuildContext, request: CompileRequest) -> CompiledContext:
        if ctx.session is not None and not ctx.events:
            ctx.events = self._recent_events(ctx, request)
        ctx.events = self._with_shared_counted(ctx.events)
        message_tokens = self.counter.count_message("user", ctx.message or "")
        if ctx.message is None:
            message_tokens = 0
        available = request.budget - message_tokens - REPLY_PRIMING
        if available <= 0:
            raise BudgetExceededError(
                f"the current message ({message_tokens:,} tokens) does not fit the "
                f"{request.budget:,}-token budget of {request.model}; shorten it or use a "
                "model with a larger window"
            )
        planned = min(history_budget(request.window, request.budget, request.sections),
                      available)
        reports: dict[str, LayerReport] = {}
        summary = self._summary(ctx, request, planned)
        history = self._history(ctx, planned - summary.cost, reports, request.provider_edits)
        if history.dropped_steps and ctx.view_summary is not None:
            # A view narrower than the session's window: what it cannot show verbatim is
            # summarized for this call (the stored session stays as it is).
            history = self._history(ctx, planned - summary.limit, reports,
                                    request.provider_edits)
            summary = self._view_summary(ctx, summary, history)
        free = available - history.tokens - summary.cost
        sections = self._section_budgets(request, free)
        # What no section was given (a new session's idle history budget) and what the
        # prefix sections leave unused go to the retrieved section, where recall (last)
        # may take all that is left: the prefix sections' budgets stay ceilings.
        spare = max(free - sum(sections.values()), 0)
        ctx.new_session = not history.events
        shown: dict[str, list[Item]] = {}
        for section in ("static", "dynamic", "retrieved"):
            budget = sections[section] + (spare if section == "retrieved" else 0)
            spare += budget - self._fit_section(ctx, request, section, budget, reports,
                                                shown, summary, elastic=ctx.new_session)
        if ctx.new_session:  # no history the provider caches behind the earlier layers
            self._leave_out_covered(ctx, reports, shown)
        rendered = {s: self._join(request, s, shown) for s in ("static", "dynamic", "retrieved")}
        fixed = sum(self.counter.count_message("system", t) for t in rendered.values() if t)
        if fixed + message_tokens + REPLY_PRIMING > request.budget:
            raise BudgetExceededError(
                f"the current message ({message_tokens:,} tokens) does not fit the "
                f"{request.budget:,}-token budget of {request.model} next to the system "
                f"context ({fixed:,} tokens); shorten it or use a larger model"
            )
        reports["message"] = LayerReport("message", "message", message_tokens, message_tokens,
                                         ["current message"] if ctx.message is not None else [])
        ordered = [reports[layer.name] for layer in request.layers if layer.name in reports]
        ordered.append(reports["message"])
        warnings = self._warnings(ordered, request)
        return CompiledContext(
            model=request.model, window=request.window, budget=request.budget,
            static_prefix=rendered["static"], dynamic=rendered["dynamic"],
            messages=events_to_turn(history.events),
            retrieved=rendered["retrieved"], message=ctx.message, layers=ordered,
            total_tokens=fixed + history.tokens + message_tokens + REPLY_PRIMING,
            token_method=self.counter.method, warnings=warnings,
        )

    def _recent_events(self, ctx: BuildContext, request: CompileRequest) -> list[Event]:
        """Enough recent live events to fill the history budget (and for reflexion),
        without reading the whole log: start from about 25 tokens an event and read
        further back only while what was read still fits the budget."""
        assert ctx.session is not None
        budget = tokens_for(request.sections["history"], request.window)
        scan = max(200, budget // 25)
        while True:
            events = ctx.store.tail_events(ctx.scope, ctx.session, scan)
            if len(events) < scan or sum(e.tokens for e in events) > budget:
                return events
            scan *= 4

    def _with_shared_counted(self, events: Sequence[Event]) -> Sequence[Event]:
        """``events``, each message that shared something with the tokens history shows
        it in: one stored before what it shared was counted had fewer."""
        counted = list(events)
        for n, event in enumerate(events):
            if event.type == "message" and not SHARED_KEYS.isdisjoint(event.metadata):
                tokens = self.counter.count_message(event.role, event.shown_content)
                if tokens > event.tokens:
                    counted[n] = replace(event, tokens=tokens)
        return counted

    def _section_budgets(self, request: CompileRequest, available: int) -> dict[str, int]:
        """Budgets of the sections around history, within what history left."""
        wanted = {s: tokens_for(b, request.window) for s, b in request.sections.items()
                  if s != "history"}
        total = sum(wanted.values())
        if total <= available:
            return wanted
        # A small window: shrink every section in proportion.
        return {s: int(v * available / total) for s, v in wanted.items()}

    def _fit_section(
        self, ctx: BuildContext, request: CompileRequest, section: str, budget: int,
        reports: dict[str, LayerReport], shown: dict[str, list[Item]], summary: Summary,
        *, elastic: bool,
    ) -> int:
        """Fit the section's layers into ``budget``; returns the tokens used. With
        ``elastic`` (a new session: no history the provider could cache), the
        ``ELASTIC`` layers take what the section has left; otherwise their budget is a
        ceiling, since what they show is sent uncached on every call."""
        layers = [layer for layer in request.layers if layer.section == section]
        remaining = budget
        for layer in sorted(layers, key=lambda spec: -spec.priority):
            if layer.name == SUMMARY_LAYER:  # counted in history's budget, not the section's
                reports[layer.name], shown[layer.name] = self._fit_summary(ctx, section,
                                                                           summary)
                continue
            limit = tokens_for(layer.budget, request.window)
            if elastic and layer.name in ELASTIC:
                limit = max(limit, remaining)
            report = reports[layer.name] = LayerReport(layer.name, section, limit)
            kept = self._fit_layer(ctx, layer.name, section, report, remaining)
            remaining -= report.used
            shown[layer.name] = kept
        return budget - remaining

    def _leave_out_covered(self, ctx: BuildContext, reports: dict[str, LayerReport],
                           shown: dict[str, list[Item]]) -> None:
        """Leave out each item that a later layer shows in the words it was taken from
        (a newest memory, its turn recalled); what that frees stays unused."""
        for name, items in shown.items():
            covered = {i.id: i.covered_by for i in items if ctx.says(i.covered_by, _fact(i))}
            if not covered:
                continue
            shown[name] = [i for i in items if i.id not in covered]
            report = reports[name]
            report.included = [i for i in report.included if i not in covered]
            report.dropped.extend((i, f"shown by {cover}") for i, cover in covered.items())
            report.used = self._cost(shown[name], range(len(shown[name])))

    def _fit_layer(self, ctx: BuildContext, name: str, section: str, report: LayerReport,
                   remaining: int) -> list[Item]:
        """The layer's items, in order, while they fit its limit and the section. An
        item whose cover (``Item.covered_by``) is shown too is left out, and its room
        goes to the items after it."""
        items = BUILDERS[name](ctx)
        kept, dropped = self._packed(items, name, section, report.budget, remaining, [])
        showing = {items[n].shows: items[n].text for n in kept if items[n].shows is not None}
        covered = {n for n in kept if (cover := items[n].covered_by) is not None and (
            holds(showing[cover], _fact(items[n])) if cover in showing
            else ctx.says(cover, _fact(items[n])))}
        if covered:
            items_left = [n for n in kept if n not in covered]
            kept, dropped = self._packed(items, name, section, report.budget, remaining,
                                         items_left, skip=covered)
            dropped += [(items[n].id, f"shown by {items[n].covered_by}") for n in covered]
        report.dropped.extend(dropped)
        considered = {item_id for item_id, _ in dropped} | {items[n].id for n in kept}
        report.texts.update((i.id, i.text[:TEXT_SHOWN]) for i in items if i.id in considered)
        for n in kept:
            item = items[n]
            report.included.append(item.id)
            ctx.included.add(item.id)
            if item.shows is not None:
                ctx.included.add(item.shows)
                ctx.shown_events[item.shows] = item.text
            ctx.shown.add(said(item.text))
        report.used = self._cost(items, kept)
        return [items[n] for n in kept]

    def _packed(self, items: Sequence[Item], name: str, section: str, limit: int,
                remaining: int, first: Sequence[int], *, skip: Collection[int] = ()
                ) -> tuple[list[int], list[tuple[str, str]]]:
        """The positions of the items kept, in order, and the reasons of those dropped:
        ``first`` counted in before the rest, ``skip`` left out."""
        kept = list(first)
        used = self._cost(items, kept)
        groups = {items[n].group for n in kept}
        dropped: list[tuple[str, str]] = []
        done = {*first, *skip}
        for n, item in enumerate(items):
            if n in done:
                continue
            if len(dropped) >= MAX_DROPS_LISTED:
                dropped.append((f"{len(items) - n} more item(s)", "over the budget"))
                break
            tokens = self.counter.count(item.text) + 1
            if item.group is not None and item.group not in groups:
                tokens += self.counter.count(item.group) + 1
            if used + tokens > limit:
                dropped.append((item.id, f"over the {name} budget"))
            elif used + tokens > remaining:
                dropped.append((item.id, f"over the {section} section budget"))
            else:
                kept.append(n)
                groups.add(item.group)
                used += tokens
        return sorted(kept), dropped

    def _cost(self, items: Sequence[Item], kept: Collection[int]) -> int:
        """The tokens of the kept items, each group's heading once."""
        headings = {items[n].group for n in kept}
        return (sum(self.counter.count(items[n].text) + 1 for n in kept)
                + sum(self.counter.count(h) + 1 for h in headings if h is not None))

    def _fit_summary(
        self, ctx: BuildContext, section: str, summary: Summary
    ) -> tuple[LayerReport, list[Item]]:
        """The compaction summary within its limit: shortened to fit, not dropped
        (unless not even ``MIN_SHRUNK`` tokens are left)."""
        report = LayerReport(SUMMARY_LAYER, section, summary.limit)
        kept: list[Item] = []
        for item in summary.items:
            text = item.text
            report.texts[item.id] = text[:TEXT_SHOWN]
            room = summary.limit - report.used
            tokens = self.counter.count(text) + 1
            if tokens > room and room >= MIN_SHRUNK:
                text = self._shrink(text, room - 1)
                tokens = self.counter.count(text) + 1
                report.dropped.append((item.id, f"shortened to fit the {section} budget"))
            if tokens > room:
                report.dropped.append((item.id, f"over the {SUMMARY_LAYER} budget"))
                continue
            kept.append(Item(item.id, text))
            report.included.append(item.id)
            report.used += tokens
            ctx.included.add(item.id)
        ctx.summary_text = " ".join(" ".join(i.text.lower().split()) for i in kept)
        return report, kept

    def _dated(self, history: History, today: date) -> History:
        """``history`` with a date before each message said on another day than the
        event before it (the first: than today), so that a conversation spanning days
        says when each part was said. The stored events are unchanged."""
        events: list[Event] = []
        added = 0
        day = today
        for event in history.events:
            said = event.timestamp.date()
            if event.type == "message" and said != day:
                prefix = f"[{day_label(said)}] "
                cost = self.counter.count(prefix)
                event = replace(event, content=prefix + event.content,
                                tokens=event.tokens + cost)
                added += cost
            day = said
            events.append(event)
        pinned = events[0] if history.pinned_task is not None else None
        return replace(history, events=events, tokens=history.tokens + added,
                       pinned_task=pinned)

    def _summary(self, ctx: BuildContext, request: CompileRequest, planned: int) -> Summary:
        """The compaction summary, which takes its tokens from the history budget (at
        most half of it, and at most its layer's budget)."""
        spec = next((layer for layer in request.layers if layer.name == SUMMARY_LAYER), None)
        if spec is None or ctx.session is None:
            return Summary([], 0, 0)
        items = BUILDERS[SUMMARY_LAYER](ctx)
        ctx.summary_text = " ".join(" ".join(i.text.lower().split()) for i in items)
        limit = min(tokens_for(spec.budget, request.window), planned // 2)
        cost = min(sum(self.counter.count(i.text) + 1 for i in items), limit)
        return Summary(items, limit, cost)

    def _view_summary(self, ctx: BuildContext, stored: Summary, history: History) -> Summary:
        """A summary of the live steps ``history`` left out (after the stored summary),
        made for this call within the stored summary's limit."""
        assert ctx.view_summary is not None
        kept = {e.id for e in history.events}
        first = min((e.id for e in history.events if e is not history.pinned_task),
                    default=None)
        left_out = [e for e in ctx.events if not e.archived and e.type != "summary"
                    and e.id not in kept and (first is None or e.id < first)]
        if not left_out:
            return stored
        previous = "\n".join(item.text.removeprefix(SUMMARY_HEADER).strip()
                             for item in stored.items) or None
        text, ctx.trail = ctx.view_summary(left_out, previous, ctx.stored_trail(),
                                           stored.limit)
        item = Item(f"a summary of events {left_out[0].id}-{left_out[-1].id} made for this "
                    "call (the stored session is unchanged)", f"{SUMMARY_HEADER}\n{text}")
        ctx.summary_text = " ".join(text.lower().split())
        cost = min(self.counter.count(item.text) + 1, stored.limit)
        return Summary([item], stored.limit, cost)

    def _shrink(self, text: str, budget: int) -> str:
        """The first lines of ``text`` that fit ``budget`` tokens, and a note."""
        lines = text.splitlines()
        note = "… [shortened to fit; search_conversation finds the rest]"
        budget -= self.counter.count(note) + 1
        kept: list[str] = []
        for line in lines:
            budget -= self.counter.count(line) + 1
            if budget < 0:
                break
            kept.append(line)
        return "\n".join([*kept, note])

    def _join(self, request: CompileRequest, section: str, shown: dict[str, list[Item]]
              ) -> str:
        blocks = ["\n".join(_arranged(shown[layer.name])) for layer in request.layers
                  if layer.section == section and shown.get(layer.name)]
        return "\n\n".join(blocks)

    def _history(
        self, ctx: BuildContext, budget: int, reports: dict[str, LayerReport],
        provider_edits: tuple[str, ...] = (),
    ) -> History:
        report = reports["history"] = LayerReport("history", "history", max(budget, 0))
        live = [e for e in ctx.events if not e.archived and e.type != "summary"]
        if any(edit.startswith(COMPACTS) for edit in provider_edits):
            live = since_provider_compaction(live)
        if ctx.session is None or budget <= 0 or not live:
            return History([], 0, 0, None, 0)
        history = self._dated(choose_history(live, budget), ctx.now.date())
        if history.pinned_task is not None:
            report.included.append(f"the current task (event {history.pinned_task.id}), "
                                   "pinned")
        steps = [e for e in history.events if e is not history.pinned_task]
        if steps:
            masked = sum(e.masked is not None for e in steps)
            report.included.append(f"events {steps[0].id}-{steps[-1].id}" + (
                f", {masked} tool output(s) masked by Loci's compaction" if masked else ""))
        if provider_edits:
            report.included.append(f"the client's context edits ({', '.join(provider_edits)}) "
                                   "are applied by the provider, to what Loci sends")
        if history.dropped_steps:
            report.dropped.append((f"{history.dropped_steps} older step(s)",
                                   "over the history budget (compaction summarizes them)"))
        if history.shortened:
            report.dropped.append((f"{history.shortened} long event(s) shortened",
                                   "over the history budget (head and tail kept)"))
        report.used = history.tokens
        ctx.included.update(f"event {e.id}" for e in history.events)
        return history

    def _warnings(self, reports: list[LayerReport], request: CompileRequest) -> list[str]:
        warnings = [
            f"{r.name} uses {r.used:,} of its {r.budget:,} tokens"
            for r in reports if r.budget and r.used > NEAR_LIMIT * r.budget
            and r.name != "message"
        ]
        warnings += [f"{r.name} dropped {len(r.dropped)} item(s)" for r in reports if r.dropped]
        if request.compactions >= COMPACTIONS_WARNING:
            warnings.append(
                f"this session was compacted {request.compactions} times: summaries of "
                "summaries lose detail; search the archived history when precision matters")
        return warnings



def _fact(item: Item) -> str:
    """What an item says, without the label it is shown under ("[MEMORY 3 May 2026] ")."""
    return _LABEL.sub("", item.text, count=1)


_LABEL = re.compile(r"\A\[[A-Z]+[^\]\n]*\]\s*")


def _arranged(items: Sequence[Item]) -> list[str]:
    """The kept items' texts: ungrouped ones first in their order, then each group under
    its heading (groups in the order of their first items, items in ``order``)."""
    plain = [i.text for i in items if i.group is None]
    grouped: dict[str, list[Item]] = {}
    for item in items:
        if item.group is not None:
            grouped.setdefault(item.group, []).append(item)
    blocks = ["\n".join([group, *(i.text for i in sorted(members, key=lambda i: i.order))])
              for group, members in sorted(grouped.items(),
                                           key=lambda g: min(i.order for i in g[1]))]
    return [*plain, *blocks]
