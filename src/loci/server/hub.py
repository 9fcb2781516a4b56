"""What every route and tool of the server shares: one store, one engine per scope,
and the rule that turns a request's credentials into a scope.

With no API keys in the store the server is in *open mode*: it only binds to loopback
(see ``loci serve``), and a request may name its user with ``X-Loci-User``. Once a key
exists, every request needs ``Authorization: Bearer <key>`` and its tenant comes from
the key alone; ``X-Loci-Agent`` picks one of that tenant's agents.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from starlette.concurrency import run_in_threadpool

from loci import (
    ApiKey,
    AuthError,
    ConflictError,
    ForbiddenError,
    Loci,
    Runtime,
    Scope,
    Settings,
    Store,
    UserErasure,
    ValidationError,
)
from loci.checks import OPERATOR, check_name
from loci.server.guard import is_loopback
from loci.timeutil import Clock, utc_now

#: How long the server trusts what the store said about keys (are there any? is this
#: one active?), in seconds: a key revoked while the server runs stops working within
#: this time. Authentication runs on the event loop, so it must not query every time.
_KEYS_TTL = 2.0
#: Checked keys remembered at most (the cache is cleared when full).
_KEYS_CACHED = 4096
#: Searches that run in threads at once in one process on SQLite (when one cannot run
#: on the event loop, see ``Hub.run``). Its one connection and the GIL serialize them
#: anyway: more threads only contend (more CPU per search, a higher p99).
_LOCAL_SEARCHES = 2
#: How long an erasure of a user waits for that user's requests under way to end, in
#: seconds (a streamed answer records its turn at its end).
ERASE_WAIT = 30.0
T = TypeVar("T")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the scope their data lives in, the key they used, and when that
    key was checked (``time.monotonic``)."""

    scope: Scope
    key_id: str | None = None
    checked_at: float = field(default_factory=time.monotonic)


class Hub:
    """The store, a bounded cache of engines by scope, and authentication."""

    def __init__(self, settings: Settings, *, store: Store | None = None,
                 clock: Clock = utc_now) -> None:
        self.runtime = Runtime(settings, store=store, clock=clock)
        self.base = self.runtime.scope()
        self.settings = self.runtime.settings
        self._engines: OrderedDict[Scope, Loci] = OrderedDict()
        self._lock = threading.Lock()
        # Requests under way by user, and the users being erased (this process's).
        self._busy: Counter[str] = Counter()
        self._erasing: set[str] = set()
        #: When each user's last erasure ended: a request whose key was checked before
        #: (its body was still coming) must not write after it.
        self._erased_at: dict[str, float] = {}
        self._idle = threading.Condition(self._lock)
        self._keys_checked = 0.0
        # A server on another host than loopback needs keys from the start.
        self._keys_exist = not is_loopback(self.settings.server.host)
        self._checked: dict[str, tuple[float, ApiKey | None]] = {}
        self._search_slots: asyncio.Semaphore | None = None
        # Searches may run on the event loop when nothing they do waits on a network.
        self._inline = self.runtime.in_process

    def engine(self, principal: Principal) -> Loci:
        """The engine for the principal's scope (created on first use, then cached)."""
        scope = principal.scope
        with self._lock:
            engine = self._engines.get(scope)
            if engine is not None:
                self._engines.move_to_end(scope)
                return engine
        engine = self.runtime.scope(scope.tenant, scope.agent)
        with self._lock:
            engine = self._engines.setdefault(scope, engine)
            while len(self._engines) > self.settings.server.cache_scopes:
                self._engines.popitem(last=False)
        return engine

    @contextmanager
    def serving(self, principal: Principal) -> Iterator[Loci]:
        """The principal's engine for the whole of one request, a streamed answer
        included: an erasure of its user waits for the request to end."""
        tenant = principal.scope.tenant
        with self._lock:
            self._refuse_erasing(tenant)
            if principal.key_id is not None and principal.checked_at < self._erased_at.get(
                    tenant, float("-inf")):
                raise AuthError(f"user {tenant!r} was erased after this request's key was "
                                "checked: nothing of it was stored")
            self._busy[tenant] += 1
        try:
            yield self.engine(principal)
        finally:
            with self._idle:
                self._busy[tenant] -= 1
                if not self._busy[tenant]:
                    del self._busy[tenant]
                self._idle.notify_all()

    def erase_user(self, user: str, *, callers: int = 0) -> UserErasure:
        """Erase ``user`` (``Runtime.erase_user``); their keys stop working at once.
        Their new requests are refused meanwhile, and the erasure first waits for those
        under way (but the ``callers`` that ask for it) to end, so that nothing they
        write outlives it; a ``ConflictError`` if they do not end within
        ``ERASE_WAIT`` seconds (nothing is erased then)."""
        with self._idle:
            self._refuse_erasing(user)
            self._erasing.add(user)
        try:
            with self._idle:
                if not self._idle.wait_for(lambda: self._busy[user] <= callers, ERASE_WAIT):
                    raise ConflictError(f"requests of user {user!r} are still under way: "
                                        "erase again when they end")
            erased = self.runtime.erase_user(user)
            with self._lock:
                self._erased_at[user] = time.monotonic()
        finally:
            with self._lock:
                self._erasing.discard(user)
                self._checked.clear()
                for scope in [s for s in self._engines if s.tenant == user]:
                    del self._engines[scope]
        return erased

    def _refuse_erasing(self, tenant: str) -> None:
        """A ``ConflictError`` while ``tenant`` is being erased (the lock held)."""
        if tenant in self._erasing:
            raise ConflictError(f"user {tenant!r} is being erased")

    def keys_required(self) -> bool:
        """True on a host other than loopback, and from the moment the store holds an
        active key (checked every few seconds, so that a key created with ``loci keys
        create`` while the server runs takes effect). Once true it stays true: revoking
        the last key locks the server, it never opens it."""
        if self._keys_exist:
            return True
        now = time.monotonic()
        if now - self._keys_checked > _KEYS_TTL:
            self._keys_exist = self.has_keys()
            self._keys_checked = now
        return self._keys_exist

    def is_operator(self, key_id: str) -> bool:
        """Whether ``key_id`` is an operator key (it acts for any user)."""
        return any(k.id == key_id and k.tenant == OPERATOR for k in self.runtime.api_keys())

    def has_keys(self) -> bool:
        """Whether the store holds an active key now."""
        return any(not k.revoked for k in self.runtime.api_keys())

    def authenticate(self, authorization: str | None, user: str | None,
                     agent: str | None) -> Principal:
        """The principal for a request's ``Authorization``, ``X-Loci-User`` and
        ``X-Loci-Agent`` headers."""
        user, agent = header_text(user), header_text(agent)
        agent_name = check_name("agent", agent) if agent else self.settings.agent
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthError("use the header 'Authorization: Bearer <API key>'")
            key = self._check(token.strip())
            if key is None:
                raise AuthError("unknown or revoked API key")
            if key.tenant == OPERATOR:
                tenant = check_name("user", user) if user else self.settings.user
                return Principal(Scope(tenant, agent_name), key.id)
            if user and user != key.tenant:
                raise ForbiddenError("this API key belongs to another user")
            return Principal(Scope(key.tenant, agent_name), key.id)
        if self.keys_required():
            raise AuthError("an API key is required: 'Authorization: Bearer <key>' "
                            "(create one with `loci keys create --user NAME`)")
        tenant = check_name("user", user) if user else self.settings.user
        return Principal(Scope(tenant, agent_name))

    async def run(self, search: Callable[[], T]) -> T:
        """Run a search (a call that only reads and computes) for a route.

        When the store and the embedder compute in this process (SQLite, a local
        model) and the store is free, it runs right here on the event loop: handing it
        to a thread costs CPU, and a thread gains nothing while the GIL and the store's
        one connection serialize the work anyway. Otherwise it runs in a thread: at most
        ``_LOCAL_SEARCHES`` at once on a local store, as many as the thread pool allows
        on PostgreSQL, whose queries wait on its server."""
        lock = self.runtime.local_lock()
        if lock is None:
            return await run_in_threadpool(search)
        if self._inline and lock.acquire(blocking=False):
            try:
                return search()
            finally:
                lock.release()
        if self._search_slots is None:
            self._search_slots = asyncio.Semaphore(_LOCAL_SEARCHES)
        async with self._search_slots:
            return await run_in_threadpool(search)

    def _check(self, token: str) -> ApiKey | None:
        """``check_key``, remembered for ``_KEYS_TTL`` seconds."""
        # The cache holds the token's digest, never the token itself.
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
        now = time.monotonic()
        seen = self._checked.get(digest)
        if seen is not None and now - seen[0] <= _KEYS_TTL:
            return seen[1]
        key = self.runtime.check_key(token)
        if len(self._checked) >= _KEYS_CACHED:
            self._checked.clear()
        self._checked[digest] = (now, key)
        return key

    def close(self) -> None:
        self.runtime.close()


def header_text(value: str | None) -> str | None:
    """A header value as the UTF-8 its bytes are (the ASGI server reads them as
    Latin-1), so that ``X-Loci-User: José`` names José."""
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise ValidationError(f"header value {value!r} is not UTF-8") from None
