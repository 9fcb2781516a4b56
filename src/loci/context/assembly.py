"""One compile as a scope's settings make it: the build context (workspace files, the
agent, matched skills, recall settings, the session's live events) and the request the
compiler takes, so that the facade only decides when a compile may compact first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from loci.context.compiled import CompiledContext
from loci.context.compiler import CompileRequest, ContextCompiler
from loci.context.history import LiveEvents
from loci.context.layers import configure
from loci.context.sources import BuildContext, agent_spec, skill_items
from loci.context.workspace import Workspace
from loci.models import Scope, StateItem
from loci.retriever import Retriever
from loci.settings import Settings
from loci.store.base import Store
from loci.tokens import token_counter

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


def compile_call(sources: Sources, call: Call, now: datetime) -> CompiledContext:
    settings, workspace = sources.settings, sources.workspace
    layers, sections = configure(settings.context.layers, settings.context.budgets)
    ctx = BuildContext(
        store=sources.store, scope=sources.scope, session=call.session, message=call.message,
        now=now, user_name=settings.user_name or sources.scope.tenant, workspace=workspace,
        retriever=sources.retriever, agent=agent_spec(workspace, sources.scope.agent),
        skills=skill_items(workspace, call.message), recall_limit=settings.recall_limit,
        reflexion_threshold=settings.reflexion_threshold, flush=call.flush, guest=call.guest,
    )
    compactions = 0
    if call.session is not None:
        compactions = len(sources.store.list_compactions(sources.scope, call.session))
        ctx.events = sources.live.get(sources.store, sources.scope, call.session, compactions)
    request = CompileRequest(
        model=call.model, window=call.window, budget=int(call.window * settings.context.target),
        layers=layers, sections=sections, compactions=compactions,
        provider_edits=sources.edits(call.session, ctx.stored_state()) if call.session
        else ())
    return ContextCompiler(token_counter(call.model, settings.tokenizer)).compile(ctx, request)
