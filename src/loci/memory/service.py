"""Saving facts: typed, deduplicated, never lost.

``save`` looks for the same fact among stored ones (keyword candidates scored by word
overlap, plus vector neighbours when embeddings are on). The same words confirm the
stored fact (its time to live counts again from now); other words for the same value
update it in place, the old words kept in its history; a new value of the same subject
(``timeline.gives_new_value``) is a memory of its own that supersedes the old one,
which is kept, linked to it and restorable (``memory.timeline``). A fact typed by an
agent is compared with facts of its type; one extracted from a conversation with facts
of every type (two rules may type one fact differently: "I have a background in
finance" and "As someone with a background in finance, I …"), and the one memory kept
takes the type that lives longer. A memory is dated when its source said it.
Everything written is mirrored to markdown when a mirror is set.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from loci.checks import check_state_key, check_text, check_type, clean_tags
from loci.errors import NotFoundError, ValidationError
from loci.indexing import Indexer
from loci.memory.dedup import Match, find_duplicate
from loci.memory.extract import Extractor
from loci.memory.mirror import Mirror
from loci.memory.tags import parse_reply, without_memories
from loci.memory.timeline import gives_new_value
from loci.memory.types import expiry_for, new_memory_id, ttl_days
from loci.models import Event, Memory, MemoryVersion, Scope, StateItem
from loci.search.query import query_terms
from loci.store.base import SearchFilters, Store, Vectors
from loci.timeutil import Clock, format_timestamp, parse_timestamp

MAX_MEMORY_CHARS = 100_000
#: The metadata key of a retired memory: why, and the expiry it had.
RETIRED = "retired"
#: The metadata key of a shared memory: the agent whose session it came from.
AGENT = "agent"
#: The metadata key listing the other sources that stated a memory again, newest last:
#: erasing the session a memory came from keeps it while another still says it.
CONFIRMED_FROM = "confirmed_from"
MAX_CONFIRMATIONS = 20
#: How many keyword and vector neighbours are compared with a new fact.
DEDUP_CANDIDATES = 10
DEDUP_QUERY_TERMS = 4


@dataclass(frozen=True)
class SaveResult:
    """What ``save`` did: "created", "refreshed", "superseded" or "updated"."""

    memory: Memory
    action: str
    previous: Memory | None = None


@dataclass(frozen=True)
class ReplyResult:
    """An assistant reply with its tags applied: what the user sees, and what was saved."""

    clean: str
    saved: list[SaveResult]
    state: list[StateItem]


class MemoryService:
    def __init__(
        self, store: Store, scope: Scope, indexer: Indexer | None, clock: Clock,
        ttls: Mapping[str, int], mirror: Mirror | None = None, home: Scope | None = None,
    ) -> None:
        """The memories of ``scope``, written for the agent of ``home`` (its events and
        state; by default ``scope``): a memory written into another scope (the user's
        shared one, ``memory.scopes``) names that agent (``AGENT``)."""
        self.store, self.scope, self.indexer = store, scope, indexer
        self.clock, self.ttls, self.mirror = clock, ttls, mirror
        self.home = home or scope

    def save(
        self, content: str, type: str = "project_context", tags: Sequence[str] = (),
        source: str | None = None, *, dedupe: bool = True, said_at: datetime | None = None,
        any_type: bool = False,
    ) -> SaveResult:
        """Save a fact (see the module's docstring). ``said_at``: when its source said it
        (a new memory is dated then; its expiry counts from now, when it was confirmed);
        ``any_type``: the same fact stored under another type is the same fact."""
        content, memory_type, tags = _validate(content, type, tags)
        if source is not None:
            check_text("source", source)
        now = self.clock()
        said = min(said_at, now) if said_at is not None else now
        vectors = self.indexer.vectors_for([content]) if self.indexer else None
        with self.store.saving(self.scope):  # no other save between the read and the write
            match = (self._duplicate(content, None if any_type else memory_type, vectors)
                     if dedupe else None)
            return self._kept(content, memory_type, tags, source, (said, now), vectors, match)

    def _kept(self, content: str, memory_type: str, tags: tuple[str, ...], source: str | None,
              times: tuple[datetime, datetime], vectors: Vectors | None, match: Match | None
              ) -> SaveResult:
        """Write a fact ``save`` checked (said and saved at ``times``): a new memory, or
        ``match`` refreshed or superseded."""
        said, now = times
        new_value = match is not None and gives_new_value(content, match.memory.content)
        if match is not None and not new_value:
            memory_type = self._longer_lived(memory_type, match.memory.type)
        expires = expiry_for(memory_type, now, self.ttls)
        if match is None or (match.kind == "changed" and new_value):
            marker = self.mirror.claim() if self.mirror else None
            held: dict[str, Any] = {"mirrors": [marker.id]} if marker else {}
            if self.home != self.scope:
                held[AGENT] = self.home.agent
            memory = Memory(new_memory_id(), memory_type, content, tags, said, now,
                            expires, source, held, confirmed_at=now)
            if match is not None and said < match.memory.created_at:
                # Said before the stored value: it was already superseded by it.
                memory = _ended(memory, match.memory.id, match.memory.created_at)
            self.store.put_memories(self.scope, [memory], vectors)
            self._mirror(memory, None)
            if match is None or memory.superseded_by is not None:
                return SaveResult(memory, "created")
            ended = _ended(match.memory, memory.id, said)
            self.store.supersede_memory(self.scope, ended, f"superseded by {memory.id}", now)
            self._mirror(ended, None)
            return SaveResult(memory, "superseded", ended)
        old = match.memory
        merged = tuple(dict.fromkeys((*old.tags, *tags)))
        fresh = replace(old, content=content, type=memory_type, tags=merged, updated_at=now,
                        expires_at=expires, created_at=min(old.created_at, said),
                        confirmed_at=now, metadata=_confirmed(old, source))
        if match.kind == "same" and old.type == memory_type:
            self.store.put_memory(self.scope, fresh)
            action = "refreshed"
        else:
            self.store.supersede_memory(self.scope, fresh, "superseded by a near-duplicate", now)
            if vectors is not None:
                self.store.set_embeddings(self.scope, "memory", [fresh.id], vectors)
            action = "superseded"
        self._mirror(fresh, old)
        return SaveResult(fresh, action, old)

    def update(
        self, memory_id: str, content: str, type: str, tags: Sequence[str],
        reason: str = "updated", *,
        expires_at: datetime | Literal["by type"] | None = "by type",
    ) -> SaveResult:
        """Replace a memory's text, type and tags; the old version goes to history. It
        expires as its type says, or at ``expires_at`` (None: never)."""
        content, memory_type, tags = _validate(content, type, tags)
        old = self.get(memory_id)
        now = self.clock()
        if expires_at == "by type":
            expires_at = expiry_for(memory_type, now, self.ttls)
        fresh = replace(old, content=content, type=memory_type, tags=tags,
                        updated_at=now, expires_at=expires_at, confirmed_at=now)
        self.store.supersede_memory(self.scope, fresh, reason, now)
        self._index_later()
        self._mirror(fresh, old)
        return SaveResult(fresh, "updated", old)

    def end(self, memory_id: str, successor_id: str, reason: str) -> Memory:
        """Supersede ``memory_id`` by ``successor_id``: it held until the successor was
        said, and links to it (kept, restorable)."""
        successor = self.get(successor_id)
        ended = _ended(self.get(memory_id), successor.id, successor.created_at)
        self.store.supersede_memory(self.scope, ended, reason, self.clock())
        self._mirror(ended, None)
        return ended

    def retype(self, memory_id: str, type: str, reason: str) -> Memory:
        """Give a memory another type as a new version; its lifetime counts from when it
        was last confirmed, not from now (a retype is no confirmation)."""
        old = self.get(memory_id)
        memory_type = check_type(type)
        fresh = replace(old, type=memory_type, updated_at=self.clock(),
                        expires_at=expiry_for(memory_type, old.last_confirmed, self.ttls))
        self.store.supersede_memory(self.scope, fresh, reason, self.clock())
        self._mirror(fresh, old)
        return fresh

    def get(self, memory_id: str) -> Memory:
        memory = self.store.get_memory(self.scope, memory_id)
        if memory is None:
            raise NotFoundError(f"no memory {memory_id!r}")
        return memory

    def history(self, memory_id: str) -> list[MemoryVersion]:
        self.get(memory_id)
        return self.store.memory_history(self.scope, memory_id)

    def forget(self, memory_id: str, *, redact_source: bool = False) -> int:
        texts: set[str] = set()
        source = None
        owner = self.scope
        if redact_source:
            memory = self.get(memory_id)
            source, owner = memory.source, self.owner(memory)
            texts = {memory.content, *(v.content for v in self.history(memory_id))}
        if not self.store.delete_memory(self.scope, memory_id):
            raise NotFoundError(f"no memory {memory_id!r}")
        if self.mirror is not None:
            self.mirror.remove(memory_id)
        return self._redact(owner, source, texts) if redact_source else 0

    def keep_from_others(self, memory_id: str, gone: Collection[str]) -> Memory | None:
        """When the sources ``gone`` (a session and its events) are erased: the memory,
        now from the newest other source that stated it again, or None if none did (it
        goes with them)."""
        memory = self.get(memory_id)
        others = [s for s in confirmations(memory) if s not in gone]
        if not others:
            return None
        metadata = {k: v for k, v in memory.metadata.items() if k != CONFIRMED_FROM}
        kept = replace(memory, source=others[-1], metadata={
            **metadata, **({CONFIRMED_FROM: others[:-1]} if others[:-1] else {})})
        self.store.put_memory(self.scope, kept)
        self._mirror(kept, memory)
        return kept

    def owner(self, memory: Memory) -> Scope:
        """The scope of the agent whose events ``memory`` came from."""
        agent = memory.metadata.get(AGENT)
        return Scope(self.scope.tenant, agent) if isinstance(agent, str) else self.scope

    def retire(self, memory_id: str, reason: str) -> Memory:
        """Expire a memory now, keeping it and the reason in its history (``restore``
        undoes it): how sync deletes, so that no deletion it infers loses a fact."""
        old = self.get(memory_id)
        now = self.clock()
        was = format_timestamp(old.expires_at) if old.expires_at else None
        retired = replace(old, updated_at=now, expires_at=now, metadata={
            **old.metadata, RETIRED: {"reason": reason, "expires_at": was}})
        self.store.supersede_memory(self.scope, retired, f"retired: {reason}", now)
        return retired

    def restore(self, memory_id: str) -> Memory:
        """Bring back a memory ``retire`` expired: active again with the expiry it had
        (or a fresh one of its type if that has passed), its file written again."""
        old = self.get(memory_id)
        retired = old.metadata.get(RETIRED)
        if not isinstance(retired, dict):
            raise ValidationError(f"memory {memory_id!r} was not retired; nothing to restore")
        now = self.clock()
        was = retired.get("expires_at")
        expires = parse_timestamp(was) if isinstance(was, str) else None
        if was is not None and (expires is None or expires <= now):
            expires = expiry_for(old.type, now, self.ttls)
        metadata = {k: v for k, v in old.metadata.items() if k != RETIRED}
        fresh = replace(old, updated_at=now, expires_at=expires, metadata=metadata,
                        superseded_by=None)
        self.store.supersede_memory(self.scope, fresh, "restored", now)
        self._mirror(fresh, None)
        return fresh

    def _redact(self, owner: Scope, source: str | None, texts: set[str]) -> int:
        """Remove the tags that wrote ``texts`` from the raw replies of the memory's
        source session; returns how many replies changed."""
        if not source or not source.startswith("session:"):
            return 0
        session = source.removeprefix("session:")
        changed: dict[int, dict[str, Any]] = {}
        for event in self.store.list_events(owner, session):
            raw = event.metadata.get("raw")
            if isinstance(raw, str) and (redacted := without_memories(raw, texts)) != raw:
                # Without the tags, nothing separates raw from the content: drop it.
                keep = redacted != event.content
                changed[event.id] = ({**event.metadata, "raw": redacted} if keep else
                                     {k: v for k, v in event.metadata.items() if k != "raw"})
        return self.store.redact_events(owner, session, changed) if changed else 0

    def purge_expired(self) -> int:
        """Hard-delete the facts whose time ran out; a superseded fact stays, as the
        history of the one that replaced it ("was …, until …")."""
        expired = [m for m in self.store.list_memories(self.scope, now=self.clock(),
                                                       expired_only=True)
                   if m.superseded_by is None]
        count = self.store.purge_expired(self.scope, self.clock())
        if self.mirror is not None:
            for memory in expired:
                self.mirror.remove(memory.id)
        return count

    def apply_reply(self, text: str, source: str | None = None) -> ReplyResult:
        """Save the ``[MEMORY:type]`` and ``[STATE:key]`` tags of an assistant reply;
        the reply without them, as the user should see it."""
        parsed = parse_reply(text)
        saved = [self.save(tag.body, tag.key, source=source) for tag in parsed.memories]
        now = self.clock()
        states = [self.store.set_state(self.home, check_state_key(tag.key),
                                       check_text("state value", tag.body), now)
                  for tag in parsed.states]
        return ReplyResult(parsed.clean, saved, states)

    def extract(self, events: Sequence[Event], extractor: Extractor, *, save: bool
                ) -> list[SaveResult]:
        """The lasting facts ``extractor`` finds in ``events``, saved with dedup (or,
        without ``save``, only proposed)."""
        results = []
        said = {e.id: e.timestamp for e in events}
        for c in extractor.extract(events):
            source = f"event:{c.event_id}" if c.event_id is not None else "extraction"
            if save:
                results.append(self.save(c.content, c.type, (c.rule, *c.topics), source,
                                         said_at=said.get(c.event_id or -1), any_type=True))
            else:
                now = self.clock()
                draft = Memory("(unsaved)", c.type, c.content, (c.rule,), now, now, None, source)
                results.append(SaveResult(draft, "proposed"))
        return results

    def _longer_lived(self, a: str, b: str) -> str:
        """Of two memory types, the one whose facts live longer (``b`` on a tie)."""
        days = [ttl_days(t, self.ttls) for t in (a, b)]
        if days[1] is None:
            return b
        return a if days[0] is None or days[0] > days[1] else b

    def _duplicate(
        self, content: str, memory_type: str | None, vectors: Vectors | None
    ) -> Match | None:
        """The stored fact ``content`` repeats, among facts of ``memory_type`` (None:
        of any type). An expired fact is a candidate too: said again, it is confirmed
        (its expiry counts from now), and a new value of it ends it as superseded."""
        filters = SearchFilters(types=(memory_type,) if memory_type else ())
        # A fact sharing more than 70% of the words shares the rarest ones; the longest
        # words are a cheap stand-in for the rarest, and few terms keep the query fast.
        rare = sorted(query_terms(content), key=len, reverse=True)[:DEDUP_QUERY_TERMS]
        hits = self.store.search_memories(self.scope, " ".join(rare), limit=DEDUP_CANDIDATES,
                                          filters=filters)
        texts = {h.id: h.text for h in hits if h.metadata["superseded_by"] is None}
        cosines: dict[str, float] = {}
        if vectors is not None:
            near = [h for h in self.store.vector_search(
                self.scope, "memory", vectors[0], limit=DEDUP_CANDIDATES, filters=filters)
                if h.metadata["superseded_by"] is None]
            texts.update((h.id, h.text) for h in near)
            cosines = {h.id: h.score for h in near}
        return find_duplicate(content, texts, cosines, self.get)

    def _index_later(self) -> None:
        if self.indexer is not None:
            self.indexer.embed_later()

    def _mirror(self, memory: Memory, previous: Memory | None) -> None:
        if self.mirror is not None:
            self.mirror.write(memory, previous)


def _ended(memory: Memory, successor: str, when: datetime) -> Memory:
    """``memory`` superseded by ``successor``, said at ``when``: it held until then (or
    until it expired, if that came first), retired so that ``restore`` brings it back."""
    until = when if memory.expires_at is None else min(memory.expires_at, when)
    was = format_timestamp(memory.expires_at) if memory.expires_at else None
    return replace(memory, expires_at=until, superseded_by=successor, metadata={
        **memory.metadata, RETIRED: {"reason": f"superseded by {successor}", "expires_at": was}})


def confirmations(memory: Memory) -> list[str]:
    """The other sources that stated ``memory`` again, newest last."""
    found = memory.metadata.get(CONFIRMED_FROM)
    return [s for s in found if isinstance(s, str)] if isinstance(found, list) else []


def _confirmed(memory: Memory, source: str | None) -> dict[str, Any]:
    """``memory``'s metadata with ``source`` among the others that stated it again."""
    if source is None or source == memory.source:
        return memory.metadata
    others = [s for s in confirmations(memory) if s != source]
    return {**memory.metadata, CONFIRMED_FROM: [*others, source][-MAX_CONFIRMATIONS:]}


def _validate(content: str, type: str, tags: Sequence[str]) -> tuple[str, str, tuple[str, ...]]:
    content = check_text("memory", content).strip()
    if not content:
        raise ValidationError("a memory needs some text")
    if len(content) > MAX_MEMORY_CHARS:
        raise ValidationError(f"a memory is limited to {MAX_MEMORY_CHARS:,} characters")
    if isinstance(tags, str):
        raise ValidationError("tags must be a list of strings")
    return content, check_type(type), clean_tags(tags)
