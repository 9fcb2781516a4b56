"""Proposing and applying a consolidation (``memory.consolidate``) for one scope.

The latest proposal is kept in the scope's state (``consolidation:pending``), so that
what a person reviewed, in the terminal, over REST or on the dashboard, is what is
applied, by its id, and a server can prepare one while the user is away. Nothing is
ever applied without :meth:`Consolidator.apply` being called with that id.

With a chat model, the model proposes: the memories in batches, one call each, its
JSON answer checked (known ids, known kinds, each memory in one change); a model that
fails or answers nonsense leaves the offline rules' proposal, with a note saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from loci.checks import check_type
from loci.errors import ConflictError, LociError, NotFoundError, ValidationError
from loci.llm.base import ChatModel
from loci.memory.consolidate import (
    KINDS,
    Consolidation,
    Proposal,
    ProposedChange,
    change,
    fingerprint,
    names_fit,
    proposal_id,
    propose_by_rules,
)
from loci.memory.service import MemoryService
from loci.models import Memory
from loci.timeutil import day_label

__all__ = ["Consolidation", "Consolidator", "Proposal", "parse_model_changes"]

#: The state key of the scope's pending proposal (left out of compiled context).
PENDING = "consolidation:pending"
#: Memories shown to the model per call.
MODEL_BATCH = 80
MODEL_PROMPT = """You tidy a user's long-term memories. Each line is one memory:
id | type | the day it was said | text.
Propose changes as JSON: {"changes": [{"kind": ..., "ids": [...], "reason": ...}, ...]}
- "merge": memories that say the same thing; the one to keep first.
- "supersede": ids [older, newer]: the newer gives a new value to what the older said.
- "retire": [id] of what is not a lasting fact about the user or their work (a question,
  a greeting, filler, a pasted document, a command line, markup of a tool).
- "retype": [id] and "type": one of sticky, user_preference, project_context,
  learned_pattern, when the stored type does not fit.
Propose nothing you are unsure of. Answer with the JSON only."""
_JSON = re.compile(r"\{.*\}", re.DOTALL)


class Consolidator:
    def __init__(self, service: MemoryService, chat: ChatModel | None) -> None:
        self.service, self.chat = service, chat

    def propose(self) -> Proposal:
        """A proposal over the scope's active memories, kept as the pending one."""
        service = self.service
        now = service.clock()
        memories = service.store.list_memories(service.scope, now=now)
        memories.reverse()  # oldest first: the order the model reads them in
        changes, proposer, notes = propose_by_rules(memories), "rules", []
        if self.chat is not None:
            try:
                changes, proposer = self._by_model(memories), self.chat.name
            except (LociError, ValueError, KeyError, TypeError) as exc:
                notes.append(f"the chat model's proposal was unusable ({exc}); "
                             "these are the offline rules'")
        proposal = Proposal(proposal_id(changes, now), now, proposer, tuple(changes),
                            tuple(notes))
        service.store.set_state(service.scope, PENDING, json.dumps(proposal.to_dict()), now)
        return proposal

    def pending(self) -> Proposal | None:
        """The pending proposal; None if there is none, or none that reads as one (an
        older version's, a damaged one: the next ``propose`` replaces it)."""
        item = self.service.store.get_state(self.service.scope, PENDING)
        if item is None:
            return None
        try:
            return Proposal.from_dict(json.loads(item.value))
        except (LociError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def apply(self, proposal_id: str) -> Consolidation:
        """Apply the pending proposal ``proposal_id``; refused (``ConflictError``) when a
        memory it names changed since it was made: propose again and review that."""
        proposal = self.pending()
        if proposal is None or proposal.id != proposal_id:
            raise NotFoundError(f"no pending consolidation proposal {proposal_id!r}")
        service = self.service
        now = {m.id: fingerprint(m) for m in service.store.list_memories(service.scope)}
        stale = {i for c in proposal.changes for i, seen in zip(c.ids, c.seen, strict=True)
                 if now.get(i) != seen}
        if stale:
            raise ConflictError(
                f"memories changed since proposal {proposal.id} was made "
                f"({', '.join(sorted(stale))}); propose again and review that")
        # Taking the pending proposal is the claim: a second apply of it finds none.
        if not service.store.delete_state(service.scope, PENDING):
            raise NotFoundError(f"no pending consolidation proposal {proposal_id!r}")
        for c in proposal.changes:
            _APPLY[c.kind](service, c, proposal.id)
        return Consolidation(proposal.id, proposal.changes)

    def _by_model(self, memories: Sequence[Memory]) -> list[ProposedChange]:
        assert self.chat is not None
        changes: list[ProposedChange] = []
        for start in range(0, len(memories), MODEL_BATCH):
            batch = memories[start:start + MODEL_BATCH]
            lines = [f"{m.id} | {m.type} | {day_label(m.created_at)} | "
                     f"{' '.join(m.content.split())[:500]}" for m in batch]
            reply = self.chat.complete([{"role": "system", "content": MODEL_PROMPT},
                                        {"role": "user", "content": "\n".join(lines)}])
            changes += parse_model_changes(reply.content, {m.id: m for m in batch})
        return changes


def parse_model_changes(text: str, memories: dict[str, Memory]) -> list[ProposedChange]:
    """The model's changes that name known memories, each memory in one change; a
    reply without a JSON object raises ``ValueError``."""
    found = _JSON.search(text)
    if found is None:
        raise ValueError("no JSON object in the reply")
    items = json.loads(found.group(0)).get("changes")
    if not isinstance(items, list):
        raise ValueError('the reply has no "changes" list')
    changes: list[ProposedChange] = []
    used: set[str] = set()
    for item in items:
        parsed = _one_change(item, memories)
        if parsed is not None and not used & set(parsed.ids):
            used |= set(parsed.ids)
            changes.append(parsed)
    return changes


def _one_change(item: Any, memories: dict[str, Memory]) -> ProposedChange | None:
    if not isinstance(item, dict) or item.get("kind") not in KINDS:
        return None
    ids = item.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) and i in memories for i in ids):
        return None
    kind, named = str(item["kind"]), [memories[i] for i in dict.fromkeys(ids)]
    if not names_fit(kind, len(named)):
        return None
    reason = str(item.get("reason") or kind)[:200]
    if kind != "retype":
        return change(kind, named, reason)
    try:
        new_type = check_type(str(item.get("type") or ""))
    except ValidationError:
        return None
    return None if new_type == named[0].type else change(kind, named, reason, new_type)


def _merge(service: MemoryService, c: ProposedChange, proposal: str) -> None:
    keep, *rest = c.ids
    for other in rest:
        service.retire(other, f"merged into {keep} (consolidation {proposal}: {c.reason})")


def _supersede(service: MemoryService, c: ProposedChange, proposal: str) -> None:
    old, new = c.ids
    service.end(old, new, f"superseded by {new} (consolidation {proposal}: {c.reason})")


def _retire(service: MemoryService, c: ProposedChange, proposal: str) -> None:
    service.retire(c.ids[0], f"consolidation {proposal}: {c.reason}")


def _retype(service: MemoryService, c: ProposedChange, proposal: str) -> None:
    assert c.type is not None
    service.retype(c.ids[0], c.type, f"retyped as {c.type} (consolidation {proposal})")


_APPLY: dict[str, Callable[[MemoryService, ProposedChange, str], None]] = {
    "merge": _merge, "supersede": _supersede, "retire": _retire, "retype": _retype}
