"""One compile as a scope's settings make it: the build context (workspace files, the
agent, matched skills, recall settings, the session's live events) and the request the
compiler takes, so that the facade only decides when a compile may compact first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from loci.context.compiled import CompiledContext
from loci.context.compiler import CompileRequest, ContextCompiler
from loci.context.history import LiveEvents
from loci.context.layers import configure
from loci.context.sources import BuildContext, ViewSummary, agent_spec, skill_items
from loci.context.workspace import Workspace
from loci.memory.scopes import memory_scopes
from loci.models import Event, Scope, StateItem
from loci.retriever import Retriever
from loci.settings import Settings
from loci.store.base import Store
from loci.text import ExtractiveSummarizer
from loci.text.trail import span_trail
from loci.tokens import context_window, known_window, token_counter, unknown_model

#: The provider's context edits of a session, found in the scope's state items.
Edits = Callable[[str, Sequence[StateItem]], tuple[str, ...]]


@dataclass(frozen=True)
class Call:
    """What one compile is for: the session and message, the model and its window."""

    session: str | None
    message: str | None
    model: str
    window: int
    flush: bool = False
    guest: bool = False
    #: A window given for this call only: what it cannot show is summarized for it.
    view: bool = False


@dataclass(frozen=True)
class Sources:
    """Where a scope's compile reads from."""

    store: Store
    scope: Scope
    settings: Settings
    workspace: Workspace
    retriever: Retriever | None
    live: LiveEvents
    edits: Edits


def compile_for(
    sources: Sources, session: str | None, message: str | None, model: str | None,
    window: int | None, now: datetime, *, flush: bool, guest: bool,
) -> CompiledContext:
    """A compile for ``model`` (the settings' by default) at ``window`` (a view) or the
    model's own window (warned about when the model is unknown)."""
    settings = sources.settings
    model = model or settings.model
    size = window or context_window(model, settings.models)
    call = Call(session, message, model, size, flush, guest, view=window is not None)
    compiled = compile_call(sources, call, now)
    if window is None and known_window(model, settings.models) is None:
        compiled.warnings.append(unknown_model(model, size))
    return compiled


def compile_call(sources: Sources, call: Call, now: datetime) -> CompiledContext:
    settings, workspace = sources.settings, sources.workspace
    layers, sections = configure(settings.context.layers, settings.context.budgets)
    ctx = BuildContext(
        store=sources.store, scope=sources.scope, session=call.session, message=call.message,
        now=now, user_name=settings.user_name or sources.scope.tenant, workspace=workspace,
        retriever=sources.retriever, agent=agent_spec(workspace, sources.scope.agent),
        skills=skill_items(workspace, call.message), recall_limit=settings.recall_limit,
        reflexion_threshold=settings.reflexion_threshold, flush=call.flush, guest=call.guest,
        view_summary=_view_summary(call.model) if call.view else None,
        memory_scopes=memory_scopes(sources.scope, settings.memory_scope),
    )
    compactions = 0
    if call.session is not None:
        compactions = sources.store.count_compactions(sources.scope, call.session)
        ctx.events = sources.live.get(sources.store, sources.scope, call.session, compactions)
    request = CompileRequest(
        model=call.model, window=call.window, budget=int(call.window * settings.context.target),
        layers=layers, sections=sections, compactions=compactions,
        provider_edits=sources.edits(call.session, ctx.stored_state()) if call.session
        else ())
    return ContextCompiler(token_counter(call.model, settings.tokenizer)).compile(ctx, request)


#: Summaries made for views, by what they summarize: a view is often compiled again.
VIEW_SUMMARIES = 64
_view_cache: OrderedDict[tuple[object, ...], tuple[str, str]] = OrderedDict()


@lru_cache(maxsize=8)
def _view_summary(model: str) -> ViewSummary:
    """The offline summarizer for views (a summary and the whole trail so far): made on
    every such compile, so never a model call; remembered by span."""
    summarizer = ExtractiveSummarizer(model=model)

    def summarize(events: Sequence[Event], previous: str | None, trail: str, budget: int
                  ) -> tuple[str, str]:
        # By content, not ids alone: two stores in one process may share ids.
        key = (model, hash(tuple((e.id, e.content) for e in events)), previous, trail, budget)
        if key not in _view_cache:
            whole = span_trail(events, trail)
            _view_cache[key] = (summarizer.summarize(events, previous, None, budget),
                                whole.render(None) if whole else "")
            while len(_view_cache) > VIEW_SUMMARIES:
                _view_cache.popitem(last=False)
        return _view_cache[key]
    return summarize
