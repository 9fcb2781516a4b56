"""Consolidation you can review: proposals to tidy the stored memories, applied only
when a person (or the program acting for one) asks.

A :class:`Proposal` lists changes of four kinds:

- **merge**: memories that say the same thing; the first is kept, the others retired;
- **supersede**: an older value of the same subject ended by a newer one (the old fact
  expires when the new one was said and links to it, ``memory.timeline``);
- **retire**: what is not a fact worth keeping (a question, a greeting, a harness's
  markup, a typed command line, a pasted document);
- **retype**: a fact stored under a type whose lifetime does not fit it.

Offline rules propose by default (:func:`propose_by_rules`); with a chat model the
model proposes (:mod:`loci.memory.review`). Applying writes each change as new
versions of the memories (their history keeps what was there, ``restore`` brings a
retired one back). Each change records a fingerprint of the memories it read: if any
of them changed after the proposal was made, applying refuses it rather than
overwriting what someone wrote since.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from loci.memory.dedup import DUPLICATE_OVERLAP, anchors, restates, word_overlap, word_set
from loci.memory.facts import is_request
from loci.memory.timeline import gives_new_value
from loci.memory.types import ttl_days
from loci.models import Memory
from loci.search.query import STOPWORDS
from loci.text.salience import is_command, is_filler, specificity
from loci.text.transcript import without_harness
from loci.timeutil import format_timestamp, parse_timestamp

KINDS = ("merge", "supersede", "retire", "retype")


def names_fit(kind: str, count: int) -> bool:
    """Whether a change of ``kind`` may name ``count`` memories."""
    return {"merge": count >= 2, "supersede": count == 2, "retire": count == 1,
            "retype": count == 1}.get(kind, False)
#: Words of a memory that pair it with others to compare (its longest ones): two
#: statements of one fact share their rarest words.
BLOCKING_WORDS = 4
#: An extracted memory longer than this, or of this many lines, was pasted, not said.
PASTED_CHARS = 1_000
PASTED_LINES = 6
_SPEAKER = re.compile(r"^\s*(?:user|assistant|human|ai)\s*:\s*", re.I)
_HARNESS_TAG = re.compile(r"</?[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+(?:\s[^<>]*)?/?>")
_PREFERENCE = re.compile(
    r"\b(?:i|the user|they|he|she|we)\s+(?:really\s+|also\s+|usually\s+|still\s+)?"
    r"(?:prefers?|likes?|loves?|enjoys?|hates?|dislikes?)\b|\bfavou?rite\b", re.I)
#: Words a person uses to the assistant about the conversation ("your suggestions", "I
#: want you to ...").
_ADDRESSES = re.compile(r"\b(?:you|your|yours)\b", re.I)
#: Where an extracted memory comes from (a memory an agent wrote on purpose is never
#: called a pasted document).
_FROM_CONVERSATION = ("event:", "session:", "extraction")


@dataclass(frozen=True)
class ProposedChange:
    """One proposed change: its ``kind``, the memories it touches (merge: the kept one
    first; supersede: the old one, then the new one), why, their texts when proposed,
    the new type of a retype, and the fingerprints that tell a stale proposal."""

    kind: str
    ids: tuple[str, ...]
    reason: str
    texts: tuple[str, ...] = ()
    type: str | None = None
    seen: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ids": list(self.ids), "reason": self.reason,
                "texts": list(self.texts), "type": self.type, "seen": list(self.seen)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProposedChange:
        """The change as ``to_dict`` wrote it; ``ValueError`` if it is not one."""
        made = cls(str(data["kind"]), tuple(map(str, data["ids"])), str(data["reason"]),
                   tuple(map(str, data.get("texts") or ())), data.get("type"),
                   tuple(map(str, data.get("seen") or ())))
        if len(made.seen) != len(made.ids) or not names_fit(made.kind, len(made.ids)) or (
                made.kind == "retype" and not isinstance(made.type, str)):
            raise ValueError(f"not a {made.kind} change: {dict(data)!r:.200}")
        return made

    def describe(self) -> list[str]:
        """The change as lines of a diff a person reads."""
        head = f"{self.kind.upper()} ({self.reason})"
        texts = dict(zip(self.ids, self.texts, strict=False))
        if self.kind == "merge":
            keep, *rest = self.ids
            return [head, f"  = {keep}: {texts.get(keep, '')}",
                    *(f"  - {i}: {texts.get(i, '')}" for i in rest)]
        if self.kind == "supersede":
            old, new = self.ids
            return [head, f"  - {old}: {texts.get(old, '')}",
                    f"  + {new}: {texts.get(new, '')}"]
        if self.kind == "retype":
            return [f"{head} -> {self.type}", f"  ~ {self.ids[0]}: {self.texts[0]}"]
        return [head, f"  - {self.ids[0]}: {self.texts[0] if self.texts else ''}"]


@dataclass(frozen=True)
class Proposal:
    """Changes proposed at ``created_at`` by ``proposer`` ("rules" or a model's name)."""

    id: str
    created_at: datetime
    proposer: str
    changes: tuple[ProposedChange, ...]
    notes: tuple[str, ...] = field(default=())

    def counts(self) -> dict[str, int]:
        return {kind: sum(c.kind == kind for c in self.changes) for kind in KINDS}

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "created_at": format_timestamp(self.created_at),
                "proposer": self.proposer, "counts": self.counts(),
                "changes": [c.to_dict() for c in self.changes], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposal:
        return cls(str(data["id"]), parse_timestamp(str(data["created_at"])),
                   str(data["proposer"]),
                   tuple(ProposedChange.from_dict(c) for c in data["changes"]),
                   tuple(data.get("notes") or ()))

    def to_text(self) -> str:
        counts = ", ".join(f"{n} {k}" for k, n in self.counts().items() if n)
        lines = [f"proposal {self.id} by {self.proposer}: {counts or 'nothing to change'}"]
        lines += [f"note: {n}" for n in self.notes]
        for change in self.changes:
            lines += ["", *change.describe()]
        return "\n".join(lines)


@dataclass(frozen=True)
class Consolidation:
    """What applying a proposal did: its changes, each written as new versions."""

    proposal_id: str
    applied: tuple[ProposedChange, ...]

    def counts(self) -> dict[str, int]:
        return {kind: sum(c.kind == kind for c in self.applied) for kind in KINDS}

    def to_dict(self) -> dict[str, Any]:
        return {"proposal_id": self.proposal_id, "counts": self.counts(),
                "applied": [c.to_dict() for c in self.applied]}


def fingerprint(memory: Memory) -> str:
    """What a change checks before it is applied: any write to the memory changes it."""
    parts = (memory.content, memory.type, " ".join(memory.tags), str(memory.expires_at),
             str(memory.superseded_by), memory.updated_at.isoformat())
    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:16]


def change(kind: str, memories: Sequence[Memory], reason: str,
           type: str | None = None) -> ProposedChange:
    return ProposedChange(kind, tuple(m.id for m in memories), reason,
                          tuple(m.content for m in memories), type,
                          tuple(fingerprint(m) for m in memories))


def proposal_id(changes: Sequence[ProposedChange], created_at: datetime) -> str:
    digest = hashlib.sha1(created_at.isoformat().encode())
    for c in changes:
        digest.update(repr((c.kind, c.ids, c.type, c.seen)).encode())
    return f"prop_{digest.hexdigest()[:12]}"


# -- the offline rules -----------------------------------------------------------------
def junk_reason(memory: Memory) -> str | None:
    """Why ``memory`` is not a fact worth keeping, or None."""
    text = memory.content
    if _HARNESS_TAG.search(text):
        return "harness markup"
    body = _SPEAKER.sub("", without_harness(text)).strip()
    if not body or is_filler(body):
        return "a greeting or filler"
    if is_command(body):
        return "a command line"
    if body.endswith("?") and not re.search(r"[.!]\s", body):
        return "a question"
    if not (memory.source or "").startswith(_FROM_CONVERSATION):
        return None  # what an agent chose to write is its own business
    if len(body) > PASTED_CHARS or body.count("\n") >= PASTED_LINES or body.startswith(
            ("#", "```")):
        return "a pasted document"
    if (_ADDRESSES.search(body) or is_request(body)) and not specificity(body, set()):
        return "said to the assistant, with nothing specific"
    return None


def propose_by_rules(memories: Sequence[Memory]) -> list[ProposedChange]:
    """Retire junk, merge duplicates, supersede restated values, retype preferences;
    each memory in at most one change."""
    changes: list[ProposedChange] = []
    kept: list[Memory] = []
    for memory in memories:
        reason = junk_reason(memory)
        if reason is None:
            kept.append(memory)
        else:
            changes.append(change("retire", [memory], reason))
    merged, superseded = _same_subject(kept)
    changes += merged + superseded
    touched = {i for c in changes for i in c.ids}
    changes += [change("retype", [m], "states a preference", "user_preference")
                for m in kept if m.id not in touched and _is_preference(m)]
    return changes


def _is_preference(memory: Memory) -> bool:
    return memory.type in ("project_context", "learned_pattern") and bool(
        _PREFERENCE.search(_SPEAKER.sub("", memory.content)))


def _same_subject(memories: Sequence[Memory]) -> tuple[list[ProposedChange], list[ProposedChange]]:
    """Duplicates (merged) and restated values (the older superseded by the newest),
    among pairs that share one of their longest words."""
    ordered = sorted(memories, key=lambda m: (m.created_at, m.id))
    group = {m.id: m.id for m in ordered}
    newer: dict[str, Memory] = {}
    for a, b in _pairs(ordered):  # a said before b
        a_names, b_names = anchors(a.content), anchors(b.content)
        if a_names and b_names and a_names != b_names:
            continue
        same_words = word_set(a.content) == word_set(b.content)
        alike = same_words or word_overlap(a.content, b.content) > DUPLICATE_OVERLAP
        if not same_words and (restates(b.content, a.content) or (
                alike and gives_new_value(b.content, a.content))):
            if a.id not in newer or newer[a.id].created_at <= b.created_at:
                newer[a.id] = b
        elif alike:
            group[_root(group, b.id)] = _root(group, a.id)
    by_id = {m.id: m for m in ordered}
    groups: dict[str, list[Memory]] = {}
    for m in ordered:
        groups.setdefault(_root(group, m.id), []).append(m)
    merges = []
    for members in groups.values():
        if len(members) > 1:
            keep = max(members, key=_worth_keeping)
            rest = [m for m in members if m is not keep]
            merges.append(change("merge", [keep, *rest], "the same fact"))
    merged = {i for c in merges for i in c.ids}
    # Each older memory is ended once, by its newest restatement.
    return merges, [change("supersede", [by_id[old], new], "a newer value of the same subject")
                    for old, new in newer.items() if old not in merged and new.id not in merged]


def _pairs(memories: Sequence[Memory]) -> Iterable[tuple[Memory, Memory]]:
    """Pairs (older, newer) sharing one of their longest words, each once."""
    buckets: dict[str, list[int]] = {}
    for n, m in enumerate(memories):
        words = sorted((w for w in word_set(m.content) if w not in STOPWORDS),
                       key=lambda w: (-len(w), w))[:BLOCKING_WORDS]
        for w in words:
            buckets.setdefault(w, []).append(n)
    seen: set[tuple[int, int]] = set()
    for members in buckets.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if (a, b) not in seen:
                    seen.add((a, b))
                    yield memories[a], memories[b]


def _root(group: dict[str, str], key: str) -> str:
    while group[key] != key:
        group[key] = group[group[key]]
        key = group[key]
    return key


def _worth_keeping(memory: Memory) -> tuple[float, int, datetime]:
    """The memory a merge keeps: the longest-lived type, then the one without a
    speaker prefix (a statement rather than a quote), then the latest confirmed."""
    days = ttl_days(memory.type)
    return (float("inf") if days is None else days,
            0 if _SPEAKER.match(memory.content) else 1, memory.last_confirmed)
