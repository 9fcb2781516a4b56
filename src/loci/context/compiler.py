"""The context compiler: what goes into the prompt for one LLM call, under budget.

Sections, in cache-friendly order (seeds/004): a byte-stable static prefix (identity),
dynamic context as a second system message (date and user, sticky facts, state,
memories by recency, the compaction summary), history by whole turns, then the current
message. Every layer reports what it included and dropped for the explain view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from loci.context.compiled import CompiledContext, LayerReport
from loci.context.render import events_to_messages, group_turns
from loci.context.workspace import Workspace
from loci.errors import BudgetExceededError
from loci.models import Event, Memory, Scope
from loci.store.base import Store
from loci.tokens import REPLY_PRIMING, TokenCounter

DEFAULT_IDENTITY = "You are {agent}, a helpful assistant with a long-term memory."
#: How many recent events the history layer considers before trimming by budget.
HISTORY_WINDOW_EVENTS = 500
RECENT_MEMORIES = 500


@dataclass(frozen=True)
class Budgets:
    """Per-section token budgets (seeds/004 defaults)."""

    static: int = 8_000
    dynamic: int = 5_000
    history: int = 10_000


@dataclass(frozen=True)
class CompileRequest:
    scope: Scope
    session: str | None
    message: str | None
    model: str
    window: int
    budget: int
    now: datetime
    user_name: str


class ContextCompiler:
    """Compiles context from a store and a workspace."""

    def __init__(
        self, store: Store, workspace: Workspace, counter: TokenCounter, budgets: Budgets
    ) -> None:
        self.store = store
        self.workspace = workspace
        self.counter = counter
        self.budgets = budgets

    def compile(self, request: CompileRequest) -> CompiledContext:
        layers: list[LayerReport] = []
        static = self._static(request, layers)
        dynamic = self._dynamic(request, layers)
        message_tokens = 0
        if request.message is not None:
            message_tokens = self.counter.count_message("user", request.message)
        fixed = (
            self.counter.count_message("system", static)
            + (self.counter.count_message("system", dynamic) if dynamic else 0)
            + message_tokens
            + REPLY_PRIMING
        )
        if fixed > request.budget:
            raise BudgetExceededError(
                f"the current message ({message_tokens:,} tokens) does not fit the "
                f"{request.budget:,}-token budget of {request.model} next to the system "
                f"context ({fixed - message_tokens:,} tokens); shorten it or use a "
                "model with a larger window"
            )
        history_budget = min(self.budgets.history, request.budget - fixed)
        history, history_tokens = self._history(request, history_budget, layers)
        layers.append(LayerReport("message", "message", message_tokens, message_tokens,
                                  ["current message"] if request.message is not None else []))
        return CompiledContext(
            model=request.model, window=request.window, budget=request.budget,
            static_prefix=static, dynamic=dynamic, history=history,
            message=request.message, layers=layers,
            total_tokens=fixed + history_tokens, token_method=self.counter.method,
        )

    def _static(self, request: CompileRequest, layers: list[LayerReport]) -> str:
        identity = self.workspace.identity()
        text = identity.text if identity else DEFAULT_IDENTITY.format(agent=request.scope.agent)
        source = str(identity.path) if identity else "built-in identity"
        layer = LayerReport("identity", "static", self.budgets.static)
        text = self._fit(text, layer, source)
        layers.append(layer)
        return text

    def _dynamic(self, request: CompileRequest, layers: list[LayerReport]) -> str:
        budget = self.budgets.dynamic
        header = f"Today is {request.now:%Y-%m-%d}. User: {request.user_name}."
        parts = [header]
        used = self.counter.count(header)
        layers.append(LayerReport("date_user", "dynamic", budget, used, ["date and user"]))
        memory_file = self.workspace.find("MEMORY.md")
        if memory_file is not None and memory_file.text:
            layer = LayerReport("memory_file", "dynamic", budget)
            lines: list[str] = []
            used = self._add(f"# MEMORY.md\n{memory_file.text}", str(memory_file.path),
                             layer, lines, budget, used)
            layers.append(layer)
            parts.extend(lines)
        memories = self.store.list_memories(request.scope, now=request.now,
                                            limit=RECENT_MEMORIES)
        sticky = sorted((m for m in memories if m.type == "sticky"), key=lambda m: m.created_at)
        recent = [m for m in memories if m.type != "sticky"]
        for name, items, label in (("sticky", sticky, "STICKY"), ("memories", recent, "MEMORY")):
            lines, used = self._lines(name, items, label, budget, used, layers)
            parts.extend(lines)
        state = self.store.list_state(request.scope)
        if state:
            layer = LayerReport("state", "dynamic", budget)
            lines = []
            for item in state:
                line = f"[STATE] {item.key} = {item.value}"
                used = self._add(line, item.key, layer, lines, budget, used)
            layers.append(layer)
            parts.extend(lines)
        summary = self._latest_summary(request)
        if summary is not None:
            layer = LayerReport("compaction_summary", "dynamic", budget)
            line = f"Previous conversation summary:\n{summary.content}"
            lines = []
            used = self._add(line, f"summary event {summary.id}", layer, lines, budget, used)
            layers.append(layer)
            parts.extend(lines)
        return "\n".join(parts)

    def _lines(
        self, name: str, items: Sequence[Memory], label: str, budget: int, used: int,
        layers: list[LayerReport],
    ) -> tuple[list[str], int]:
        layer = LayerReport(name, "dynamic", budget)
        lines: list[str] = []
        for memory in items:
            used = self._add(f"[{label}] {memory.content}", memory.id, layer, lines, budget, used)
        if items:
            layers.append(layer)
        return lines, used

    def _add(
        self, line: str, item: str, layer: LayerReport, lines: list[str], budget: int, used: int
    ) -> int:
        tokens = self.counter.count(line) + 1
        if used + tokens > budget:
            layer.dropped.append((item, "over the dynamic budget"))
            return used
        lines.append(line)
        layer.included.append(item)
        layer.used += tokens
        return used + tokens

    def _fit(self, text: str, layer: LayerReport, source: str) -> str:
        tokens = self.counter.count(text)
        if tokens > layer.budget:
            # Cut by characters in proportion; deterministic, so the prefix stays stable.
            text = text[: max(1, len(text) * layer.budget // tokens)]
            layer.dropped.append((f"{source} (tail)", "over the static budget"))
            tokens = self.counter.count(text)
        layer.used = tokens
        layer.included.append(source)
        return text

    def _latest_summary(self, request: CompileRequest) -> Event | None:
        if request.session is None:
            return None
        events = self.store.tail_events(request.scope, request.session, HISTORY_WINDOW_EVENTS)
        summaries = [e for e in events if e.type == "summary"]
        return summaries[-1] if summaries else None

    def _history(
        self, request: CompileRequest, budget: int, layers: list[LayerReport]
    ) -> tuple[list[dict[str, object]], int]:
        layer = LayerReport("history", "history", budget)
        layers.append(layer)
        if request.session is None:
            return [], 0
        events = self.store.tail_events(request.scope, request.session, HISTORY_WINDOW_EVENTS)
        turns = group_turns([e for e in events if e.type != "summary"])
        kept: list[list[Event]] = []
        for position, turn in enumerate(reversed(turns)):
            tokens = sum(e.tokens for e in turn)
            if layer.used + tokens > budget:
                older = len(turns) - position
                layer.dropped.append((f"{older} older turn(s)", "over the history budget"))
                break
            kept.append(turn)
            layer.used += tokens
        kept.reverse()
        flat = [e for turn in kept for e in turn]
        if flat:
            layer.included.append(f"{len(kept)} turn(s), events {flat[0].id}-{flat[-1].id}")
        return events_to_messages(flat), layer.used
