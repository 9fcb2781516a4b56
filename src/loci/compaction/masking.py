"""Stage 1: observation masking (it matches LLM summarization at about half the cost).
Old tool outputs are replaced *in history only* by a placeholder
or their head; the event's content is untouched, so search and export still see it, and
outputs over ``artifact_chars`` also become a readable document under ``/artifacts/``.
Skill bodies (events whose metadata has ``skill``) are never masked."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from loci.models import Event

PLACEHOLDER = "[TOOL OUTPUT ARCHIVED — search history for details]"
#: Outputs this short are cheaper to keep than to mask.
KEEP_CHARS = 200


@dataclass(frozen=True)
class Mask:
    event_id: int
    text: str
    artifact_path: str | None = None


def artifact_path(session: str, event_id: int) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", session).strip("-.") or "session"
    return f"/artifacts/{slug}/{event_id}.txt"


def compact_tool_output(content: str, max_chars: int, event_id: int) -> str:
    """``compact_tool_output``: keep the beginning, note the truncation."""
    if len(content) <= max_chars:
        return content
    head = content[:max_chars].rsplit("\n", 1)[0] if "\n" in content[:max_chars] else (
        content[:max_chars])
    return (f"{head}\n… [truncated {len(content) - len(head):,} characters; the full output "
            f"is event {event_id} — search history for details]")


def plan_masks(
    old: Sequence[Event], recent: Sequence[Event], session: str, mask_chars: int,
    artifact_chars: int,
) -> list[Mask]:
    """Masks for tool outputs: old ones (outside the preserve window) become a
    placeholder; recent ones are protected unless huge, when they keep their head. Any
    output over ``artifact_chars`` is also kept whole as an artifact document."""
    masks = []
    for protected, events in ((False, old), (True, recent)):
        for event in events:
            if event.type != "tool_result" or event.masked is not None:
                continue
            if event.metadata.get("skill") or len(event.content) <= KEEP_CHARS:
                continue
            big = len(event.content) > artifact_chars
            path = artifact_path(session, event.id) if big else None
            where = f"; full output: {path}" if path else ""
            if not protected:
                text = (f"{PLACEHOLDER} (event {event.id}, {len(event.content):,} "
                        f"characters{where})")
            elif big:
                text = compact_tool_output(event.content, mask_chars, event.id) + where
            else:
                continue
            masks.append(Mask(event.id, text, path))
    return masks
