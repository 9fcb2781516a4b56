"""Frozen dataclasses of the data model: scope, events, memories, state, documents,
skills, compactions and search hits. No I/O lives here.

Everything is scoped tenant (user) → agent → session; a ``Scope`` names the first two
and every store call takes one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

EventType = Literal["message", "tool_call", "tool_result", "summary"]
Role = Literal["user", "assistant", "system", "tool"]

EVENT_TYPES: tuple[str, ...] = ("message", "tool_call", "tool_result", "summary")
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
#: The first line of a summary event's content (a compaction's, or one made for a view).
SUMMARY_HEADER = "[CONTEXT SUMMARY]"
#: The role an event of each non-message type is stored with.
DEFAULT_ROLE: dict[str, str] = {
    "tool_call": "assistant",
    "tool_result": "tool",
    "summary": "system",
}


@dataclass(frozen=True)
class Scope:
    """Who owns the data: a tenant (the user) and one of their agents."""

    tenant: str = "default"
    agent: str = "default"


#: The agent under which a user's shared memories are kept (``[memory] scope = "user"``:
#: ``loci.memory.scopes``). ``checks.RESERVED_NAMES`` holds it: no agent can be named so.
SHARED_AGENT = "*"


@dataclass(frozen=True)
class NewEvent:
    """An event to append; the store assigns ``id`` and ``tokens`` is precomputed."""

    type: str
    role: str
    content: str
    timestamp: datetime
    tokens: int = 0
    tool_name: str | None = None
    tool_call_id: str | None = None
    args: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The time is the engine's "now" (not the caller's): the store keeps it at or after
    #: the session's latest event, so that concurrent writers never run time backwards.
    stamped: bool = False
    #: Stored as compaction left it (an exported log imported again).
    archived: bool = False


@dataclass(frozen=True)
class Event:
    """One line of a session's append-only log."""

    id: int
    session: str
    type: str
    role: str
    content: str
    timestamp: datetime
    tokens: int
    tool_name: str | None = None
    tool_call_id: str | None = None
    args: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    archived: bool = False
    #: What history shows instead of ``content`` once compaction masked it.
    masked: str | None = None

    @property
    def shown_content(self) -> str:
        """The content as a model is shown it: a message's with what it shared."""
        return self.content + shared(self.metadata) if self.type == "message" else self.content


#: Characters of a speaker's name that are kept.
NAME_CHARS = 500


def speaker(metadata: Any) -> str | None:
    """The ``name`` of whoever wrote an event, if its metadata says."""
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if isinstance(name, str) and name.strip():
        return " ".join(name.split())[:NAME_CHARS]
    return None


#: Characters of one description of what an event shared that are kept.
CAPTION_CHARS = 500
#: Descriptions of what one event shared that are kept (the first ones).
MAX_CAPTIONS = 20
#: The metadata keys that describe what an event shared.
SHARED_KEYS = frozenset({"caption", "attachments"})
_ATTACHMENT_KEYS = ("caption", "alt", "title", "name", "text")


def captions(metadata: Mapping[str, Any] | None) -> list[str]:
    """Descriptions of what the event shared: ``caption`` and ``attachments``, at most
    ``MAX_CAPTIONS`` of ``CAPTION_CHARS`` each."""
    metadata = _mapping(metadata)
    found: list[str] = []
    for value in _as_list(metadata.get("caption")):
        if isinstance(value, str):
            found.append(value)
    for item in _as_list(metadata.get("attachments")):
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, Mapping):
            found.extend(str(item[k]) for k in _ATTACHMENT_KEYS
                         if isinstance(item.get(k), str))
    cleaned = (" ".join(text.split())[:CAPTION_CHARS] for text in found)
    return list(dict.fromkeys(text for text in cleaned if text))[:MAX_CAPTIONS]


def shared(metadata: Mapping[str, Any] | None) -> str:
    """``" (shared: caption; …)"``, what the event shared as the model is shown it
    (a photo is only its caption to a model that never saw it), or ""."""
    found = captions(metadata)
    return f" (shared: {'; '.join(found)})" if found else ""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


@dataclass(frozen=True)
class SessionInfo:
    """Session metadata, derived from the log."""

    id: str
    event_count: int
    message_count: int
    token_count: int
    active_token_count: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Memory:
    """A typed fact. ``created_at`` is when it was first said, ``confirmed_at`` when it
    was last stated again (None: not since it was saved), ``expires_at`` None means it
    never expires (sticky). ``superseded_by`` names the newer fact on the same subject
    that ended it (the memory then expires when that one was said)."""

    id: str
    type: str
    content: str
    tags: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    confirmed_at: datetime | None = None
    superseded_by: str | None = None

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    @property
    def last_confirmed(self) -> datetime:
        """When the fact was last stated: its expiry counts from here."""
        return self.confirmed_at or self.updated_at


@dataclass(frozen=True)
class MemoryVersion:
    """An earlier version of a memory, kept when it was superseded or refreshed."""

    memory_id: str
    version: int
    type: str
    content: str
    tags: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    superseded_at: datetime
    reason: str


@dataclass(frozen=True)
class StateItem:
    """A key/value pair, overwritten in place."""

    key: str
    value: str
    updated_at: datetime


@dataclass(frozen=True)
class ApiKey:
    """A server API key's record. The secret itself is never stored, only its hash."""

    id: str
    tenant: str
    label: str
    created_at: datetime
    revoked: bool = False


@dataclass(frozen=True)
class Document:
    """A knowledge-base entry at a hierarchical path such as ``/profile/identity.md``."""

    path: str
    content: str
    tags: tuple[str, ...]
    version: int
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """The content's SHA-256 (hex): what a writer saw, for a write that must not
        replace a newer version (``expected_sha256``)."""
        return content_sha256(self.content)


def content_sha256(content: str | None) -> str:
    """The SHA-256 (hex) of a document's content; "" for no document."""
    return "" if content is None else hashlib.sha256(content.encode()).hexdigest()


@dataclass(frozen=True)
class DocumentVersion:
    """An earlier version of a document, kept when a new version replaced it."""

    path: str
    version: int
    content: str
    tags: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    superseded_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Skill:
    """A markdown skill injected when its triggers score above zero on a message."""

    slug: str
    name: str
    body: str
    keywords: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Compaction:
    """A record of one compaction of a session's span of events."""

    id: int
    session: str
    strategy: str
    first_event_id: int
    last_event_id: int
    summary_event_id: int | None
    summary: str
    tokens_before: int
    tokens_after: int
    created_at: datetime


@dataclass(frozen=True)
class SearchHit:
    """One search result. ``score`` is in [0, 1]; higher is better."""

    kind: Literal["event", "memory", "document"]
    id: str
    score: float
    text: str
    timestamp: datetime
    session: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def rescored(self, score: float) -> SearchHit:
        """This hit with another score (``dataclasses.replace`` costs several times more,
        and fusion rescores every candidate of every search)."""
        return SearchHit(self.kind, self.id, score, self.text, self.timestamp, self.session,
                         self.metadata)


@dataclass(frozen=True)
class Usage:
    """The tokens of one LLM call, the same whatever the provider said them in:
    ``input_tokens`` counts every input token, cached or not (OpenAI's
    ``prompt_tokens``; Anthropic's input, cache-read and cache-write tokens together)."""

    input_tokens: int = 0
    #: Input tokens read from the provider's prompt cache.
    cached_tokens: int = 0
    #: Input tokens written to the prompt cache (Anthropic prices them apart).
    cache_write_tokens: int = 0
    output_tokens: int = 0

    @property
    def uncached_tokens(self) -> int:
        return max(0, self.input_tokens - self.cached_tokens - self.cache_write_tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens,
                     self.cached_tokens + other.cached_tokens,
                     self.cache_write_tokens + other.cache_write_tokens,
                     self.output_tokens + other.output_tokens)


@dataclass(frozen=True)
class NewUsage:
    """A call to record (``UsageLedger.record``): what the store cannot know itself."""

    session: str
    model: str
    #: Which face made the call: ``chat``, ``messages``, ``responses`` or ``library``.
    face: str
    usage: Usage
    at: datetime
    latency_ms: float | None = None
    #: The compiled context's tokens, in all and per layer, and its static-prefix hash.
    context_tokens: int = 0
    layers: Mapping[str, int] = field(default_factory=dict)
    prefix_hash: str = ""
    #: Tokens a client without Loci would have sent besides the session's log: its own
    #: system text and a new message not recorded yet.
    base_tokens: int = 0


@dataclass(frozen=True)
class UsageRecord:
    """One recorded LLM call (``NewUsage``'s fields, the usage spread out), with the
    session's log as it stood when it was recorded, counted by the store: from it
    follows what a client without Loci would have sent."""

    id: int
    agent: str
    session: str
    at: datetime
    model: str
    face: str
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    latency_ms: float | None
    context_tokens: int
    layers: Mapping[str, int]
    prefix_hash: str
    base_tokens: int
    #: Tokens and events of the session's log then (summaries left out; tokens as each
    #: event was appended, before any masking), how many compactions the session had
    #: had, and the last event counted.
    log_tokens: int
    log_events: int
    compactions: int
    last_event: int

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.cached_tokens, self.cache_write_tokens,
                     self.output_tokens)
