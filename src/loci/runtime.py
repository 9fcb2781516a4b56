"""The process-wide runtime, and ``Loci``: the view of one of its scopes.

A ``Runtime`` owns the store, the embedder (through the indexer), the retriever, the chat
model, the typed configurations read from settings and the cache of live events, and
closes them all. ``runtime.scope(user, agent)`` returns a light ``Loci`` view of one
scope: building one costs no model, client or connection, so a server may open one per
request. A ``Loci`` is a ``ScopeView`` (``loci.engine``: its operations) that can also be
opened from settings, owning the runtime built for it.
"""

from __future__ import annotations

import _thread
from datetime import timedelta
from types import TracebackType
from typing import Any

from loci.checks import check_label, check_name, check_stored_name, check_text
from loci.compaction.service import chat_model_from
from loci.context.history import LiveEvents
from loci.embeddings import IN_PROCESS, make_embedder
from loci.embeddings.base import Embedder
from loci.engine import ScopeView
from loci.erasure import (
    RetentionReport,
    UserErasure,
    apply_retention,
    erase_user,
    scopes_of,
)
from loci.errors import ConflictError, ValidationError
from loci.indexing import Indexer, IndexStatus
from loci.keys import OPERATOR, check_key, create_key, revoke_key
from loci.llm.base import ChatModel
from loci.memory.live import TurnExtraction
from loci.models import SHARED_AGENT, ApiKey, Scope
from loci.portability import export_user, import_user
from loci.retriever import Retriever
from loci.settings import MAX_RETENTION_DAYS, RETENTION_ACTIONS, Settings, load_settings
from loci.store import Store, open_store
from loci.timeutil import Clock, utc_now
from loci.upstreams import Upstream, Upstreams

#: Sessions whose live events the runtime keeps between compiles, over all scopes.
LIVE_SESSIONS = 256
#: Seconds an erasure of a user waits for the facts of earlier turns to be saved.
ERASE_EXTRACTION_WAIT = 60.0


class Runtime:
    """Store, embedder, chat model and configuration, built once per process."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
        clock: Clock = utc_now,
        indexer: Indexer | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        # Models first: a bad value fails at open, before the store is opened (nothing to
        # leak); settings were checked when they were loaded.
        self.chat: ChatModel | None = chat_model_from(self.settings)
        embedder = embedder_from(self.settings) if indexer is None else None
        self.store = store or open_store(
            self.settings.store_url, vector_memory_mb=self.settings.search.vector_memory_mb)
        self.clock = clock
        self.indexer = indexer or (Indexer(self.store, embedder) if embedder is not None
                                   else None)
        self.retriever = Retriever(self.store, self.indexer, self.settings.search)
        self.live_events = LiveEvents(LIVE_SESSIONS)
        self.extraction = TurnExtraction(self.store.local_lock())
        #: The proxy's upstream models, built on first use (``upstream``).
        self.upstreams = Upstreams()
        self._owned: list[object] = [self.chat, embedder]
        if store is None:
            self._owned.append(self.store)
        self.closed = False

    @classmethod
    def open(cls, *, clock: Clock = utc_now, **settings: Any) -> Runtime:
        """A runtime with settings loaded from files and environment, plus ``settings``."""
        return cls(load_settings(**settings), clock=clock)

    def scopes(self) -> list[Scope]:
        """Every user and agent the store holds data of (a user's shared memories are
        their agents': ``memory.scopes``)."""
        return [s for s in self.store.list_scopes() if s.agent != SHARED_AGENT]

    def memory_views(self) -> dict[Scope, Loci]:
        """A view for each scope of memories the store holds (a user's shared ones are
        seen through their settings' agent); names older versions allowed, that no view
        opens, are left out."""
        views: dict[Scope, Loci] = {}
        for held in self.store.list_scopes():
            try:
                loci = self.scope(held.tenant, None if held.agent == SHARED_AGENT
                                  else held.agent)
            except ValidationError:
                continue
            views.setdefault(loci.memory_scopes[0], loci)
        return views

    def scope(self, user: str | None = None, agent: str | None = None) -> Loci:
        """The ``Loci`` view of one user's agent (the settings' defaults if not given)."""
        return Loci(runtime=self, user=user, agent=agent)

    def upstream(self) -> Upstream:
        """The configured upstream model, built once and kept until ``close`` (a
        ``NoUpstreamError``, HTTP 503, says how to configure one)."""
        return self.upstreams.get(self.settings)

    @property
    def in_process(self) -> bool:
        """Whether the embedder (if any) computes in this process: with a local store,
        a call then waits on no network and may run on an event loop."""
        return self.indexer is None or self.settings.embedding.provider in IN_PROCESS

    def index_status(self) -> IndexStatus | None:
        """The vector index's model and lag (None when embeddings are off)."""
        return self.indexer.status() if self.indexer is not None else None

    def local_lock(self) -> _thread.RLock | None:
        """The lock calls take while they compute in this process (SQLite, whose one
        connection serializes them), or None when the store computes elsewhere."""
        return self.store.local_lock()

    # -- API keys: each serves one user (tenant) of the whole store ------------------
    def create_key(self, user: str | None, label: str = "") -> tuple[ApiKey, str]:
        """A new API key for ``user``, or with None an operator key that acts for any
        user a request names (``keys.OPERATOR``): its record, and the key itself
        (shown once)."""
        tenant = OPERATOR if user is None else check_name("user", user)
        # Printed by `loci keys list`: no escape characters, no megabytes.
        return create_key(self.store, tenant, self.clock(),
                          check_label("label", label) if label else "")

    def api_keys(self, user: str | None = None) -> list[ApiKey]:
        """Key records (never the keys), of one user or of all. The operator is no
        user: the keys of a user named ``OPERATOR`` (rows older versions stored) are
        none, so erasing that name shows and revokes no operator key."""
        if user == OPERATOR:
            return []
        return self.store.list_api_keys(user)

    def check_key(self, key: str) -> ApiKey | None:
        """The active record of ``key``, or None if unknown, malformed or revoked."""
        return check_key(self.store, key)

    def revoke_key(self, key_id: str) -> str:
        """Revoke a key, named by its id or as a whole; returns its id."""
        return revoke_key(self.store, check_text("key id", key_id))

    def agents(self, user: str) -> list[str]:
        """The agents that hold anything of ``user``, by name."""
        return sorted(s.agent for s in scopes_of(self.store, check_stored_name("user", user)))

    def erase_user(self, user: str) -> UserErasure:
        """Erase everything of ``user``, every agent of theirs: events, memories with their
        history and markdown files, state, documents with their versions, API keys, index
        entries and vector files. Nothing of another user changes. The facts of the
        user's turns that wait to be taken are dropped, and the erasure waits for those
        being taken, so that none is saved after it (a ``ConflictError`` if that takes
        over ``ERASE_EXTRACTION_WAIT`` seconds)."""
        user = check_stored_name("user", user)
        if not self.extraction.forget(user, ERASE_EXTRACTION_WAIT):
            raise ConflictError("facts are still being taken from the user's turns (a "
                                "slow chat model?): erase again when they are saved")
        root = self.settings.memory_root if self.settings.memory_mirror else None
        return erase_user(self.store, user, root, self.live_events)

    def finish_erasure(self) -> bool:
        """Finish purging what an interrupted erasure deleted from the store's files;
        whether one was owed."""
        return self.store.finish_erasure()

    def apply_retention(self, days: float | None = None,
                        action: str | None = None) -> RetentionReport:
        """Erase or archive the sessions untouched for ``days`` (default: the
        ``[retention]`` settings; with 0 days, nothing is done)."""
        policy = self.settings.retention
        days = policy.days if days is None else days
        action = action or policy.action
        if action not in RETENTION_ACTIONS or not 0 <= days <= MAX_RETENTION_DAYS:
            raise ValidationError(f"retention needs days from 0 to {MAX_RETENTION_DAYS:,} "
                                  f"and an action in {RETENTION_ACTIONS}")
        cutoff = self.clock() - timedelta(days=days)
        if days == 0:
            return RetentionReport(action, cutoff, 0, 0)
        return apply_retention(self.store, cutoff, action, self.live_events)

    def export_user(self, user: str) -> bytes:
        """Everything of ``user`` as one zip archive (see ``loci.portability``)."""
        return export_user(self.store, check_stored_name("user", user), self.clock())

    def import_user(self, archive: bytes) -> list[Scope]:
        """Write an exported user into this store (which must hold nothing of theirs);
        the items are embedded with this runtime's model, in the background."""
        scopes = import_user(self.store, archive)
        if self.indexer is not None:
            self.indexer.embed_later()
        return scopes

    def close(self) -> None:
        """Close the chat model's and the embedder's clients and the store this runtime
        opened; closing twice does nothing."""
        if self.closed:
            return
        self.closed = True
        self.extraction.close()  # its jobs save memories: before what they use closes
        self.upstreams.close()
        self.retriever.close()
        if self.indexer is not None:  # its worker uses the store and the embedder
            self.indexer.close()
        for resource in self._owned:
            close = getattr(resource, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Loci(ScopeView):
    """Context and memory for one user's agent.

    >>> with Loci.open(store="sqlite:///:memory:") as loci:
    ...     _ = loci.add("s1", "user", "I live in Lisbon.")
    ...     loci.compile("s1", "Where do I live?").to_openai()[-1]["content"]
    'Where do I live?'
    """

    runtime: Runtime

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
        clock: Clock | None = None,
        indexer: Indexer | None = None,
        runtime: Runtime | None = None,
        user: str | None = None,
        agent: str | None = None,
    ) -> None:
        """A view of one scope of ``runtime`` (``Runtime.scope``), or, without one, of a
        runtime built here from ``settings``, ``store`` and ``indexer`` and closed with it."""
        self._owns_runtime = runtime is None
        super().__init__(runtime or Runtime(settings, store=store, clock=clock or utc_now,
                                            indexer=indexer), user, agent, clock)

    @classmethod
    def open(cls, *, clock: Clock = utc_now, **settings: Any) -> Loci:
        """Open with settings loaded from files and environment, plus ``settings``."""
        return cls(load_settings(**settings), clock=clock)

    def for_scope(self, user: str | None = None, agent: str | None = None) -> Loci:
        """The same runtime seen as another user or agent (this view's clock)."""
        return Loci(runtime=self.runtime, user=user or self.settings.user,
                    agent=agent or self.settings.agent, clock=self.clock)

    def close(self) -> None:
        """Close the runtime if this view built it (``Loci.open``); a scope's view of a
        shared runtime leaves it open."""
        if self._owns_runtime:
            self.runtime.close()

    def __enter__(self) -> Loci:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def embedder_from(settings: Settings) -> Embedder | None:
    """The configured embedder, or None with embeddings off."""
    provider = settings.embedding.provider.strip().lower()
    if provider == "none":
        return None
    return make_embedder(
        settings.embedding.provider, model=settings.embedding.model,
        base_url=settings.embedding.base_url, api_key=settings.embedding.api_key,
        threads=settings.embedding.threads or None,
        cache=settings.model_cache if provider == "local" else None,
    )
