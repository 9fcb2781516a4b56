"""One chat-model call per user turn decides what the memory keeps (the shape Mem0 uses).

The model sees the turn and the stored facts most similar to it (numbered, so it never
has to copy an id) and answers with a JSON list of operations: ``ADD`` a new fact,
``UPDATE`` a numbered fact with new text (the old text stays in its history), ``DELETE``
one the turn contradicts (retired, kept in history, so nothing is lost) or ``NONE``. A
reply that is not such a list is no decision: the caller falls back to the rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

from loci.errors import LociError
from loci.llm.base import ChatModel
from loci.memory.extract import readable_lines
from loci.memory.facts import topics
from loci.memory.service import MemoryService, SaveResult
from loci.memory.types import DEFAULT_TTL_DAYS
from loci.models import Event, Memory
from loci.search.query import query_terms
from loci.store.base import SearchFilters

#: Stored facts shown to the model with a turn.
SIMILAR_FACTS = 8
_JSON = re.compile(r"\{.*\}|\[.*\]", re.DOTALL)

DECISION_PROMPT = """You keep a notebook of facts about a user and their work.
You get the facts already stored (numbered) and the user's new message. Reply with JSON
only: {"memory": [{"event": "ADD", "text": "...", "type": "..."},
{"event": "UPDATE", "id": 3, "text": "..."}, {"event": "DELETE", "id": 5},
{"event": "NONE"}]}.
- ADD a lasting fact the message states about the user: who they are, people and things
  in their life with their names, preferences, plans and dates, decisions,
  commitments, what was learned. Write each as one self-contained sentence with its
  subject ("The user's dog is called Biscuit"), dated when the message says when.
- UPDATE a numbered fact the message changes or makes more precise; DELETE one it
  contradicts; NONE when the message holds no lasting fact.
- Never store questions, greetings, requests, pasted text or the assistant's ideas.
- type: sticky (identity, never expires), user_preference, project_context or
  learned_pattern."""


def decide_turn(memories: MemoryService, event: Event, chat: ChatModel
                ) -> list[SaveResult] | None:
    """Apply the model's decision on ``event``; None if its reply is no decision."""
    text = readable_lines(event)
    if not text:
        return []
    similar = _similar(memories, text)
    listed = "\n".join(f"{n}. {m.content}" for n, m in enumerate(similar)) or "(none)"
    reply = chat.complete([
        {"role": "system", "content": DECISION_PROMPT},
        {"role": "user", "content": f"Stored facts:\n{listed}\n\nNew message "
                                    f"({event.timestamp:%d %B %Y}):\n{text}"},
    ])
    operations = _operations(reply.content)
    if operations is None:
        return None
    results = []
    for op in operations:
        result = _apply(memories, event, op, similar)
        if result is not None:
            results.append(result)
    return results


def _similar(memories: MemoryService, text: str) -> list[Memory]:
    """The stored facts nearest ``text``: vector neighbours and keyword matches."""
    filters = SearchFilters(now=memories.clock())
    found: dict[str, None] = {}
    if memories.indexer is not None and (vectors := memories.indexer.vectors_for([text])
                                         ) is not None:
        found.update((h.id, None) for h in memories.store.vector_search(
            memories.scope, "memory", vectors[0], limit=SIMILAR_FACTS, filters=filters))
    terms = sorted(query_terms(text), key=len, reverse=True)[:SIMILAR_FACTS]
    if terms:
        found.update((h.id, None) for h in memories.store.search_memories(
            memories.scope, " ".join(terms), limit=SIMILAR_FACTS, filters=filters))
    loaded = [m for i in found if (m := memories.store.get_memory(memories.scope, i))]
    if len(loaded) < SIMILAR_FACTS:  # the newest facts, which a turn most often revises
        shown = {m.id for m in loaded}
        loaded += [m for m in memories.store.list_memories(
            memories.scope, now=filters.now, limit=SIMILAR_FACTS) if m.id not in shown]
    return loaded[:SIMILAR_FACTS]


def _operations(reply: str) -> list[dict[str, Any]] | None:
    match = _JSON.search(reply)
    if match is None:
        return None
    try:
        data = json.loads(match.group())
    except ValueError:
        return None
    items = data.get("memory") if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return None
    return items


def _apply(memories: MemoryService, event: Event, op: dict[str, Any],
           similar: list[Memory]) -> SaveResult | None:
    kind = str(op.get("event", "NONE")).upper()
    text = op.get("text")
    target = _numbered(op.get("id"), similar)
    source = f"event:{event.id}"
    try:
        if kind == "ADD" and isinstance(text, str) and text.strip():
            memory_type = op.get("type")
            if memory_type not in DEFAULT_TTL_DAYS:
                memory_type = "project_context"
            return memories.save(text, str(memory_type), ("llm", *topics(text)), source,
                                 said_at=event.timestamp)
        if kind == "UPDATE" and target is not None and isinstance(text, str) and text.strip():
            return memories.update(target.id, text, target.type, target.tags,
                                   reason=f"updated from {source}")
        if kind == "DELETE" and target is not None:
            retired = memories.retire(target.id, f"contradicted by {source}")
            return SaveResult(retired, "retired", target)
    except LociError:
        return None  # one bad operation (an empty text, say) does not undo the others
    return None


def _numbered(number: Any, similar: list[Memory]) -> Memory | None:
    try:
        index = int(number)
    except (TypeError, ValueError):
        return None
    return similar[index] if 0 <= index < len(similar) else None
