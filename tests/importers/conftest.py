"""Samples of real agent logs (``data/``) and helpers to count what an import kept."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from loci import Event

DATA = Path(__file__).parent / "data"
#: A real Claude Code project folder: session 3af9b1a7 of the dev set as Claude Code wrote
#: it (public repository M-Thisness/M-Claude, CC0, commit 5a8d89e, Archives/; 168 tool
#: calls, one automatic compaction) and a subagent's file of another session.
CLAUDE_PROJECT = DATA / "claude_project"
CLAUDE_SESSION = CLAUDE_PROJECT / "3af9b1a7-6512-4883-ad18-320658ced099.jsonl.gz"
#: The same session as the dev set keeps it: the Messages list Claude Code sends.
MESSAGES_LIST = DATA / "cc-3af9b1a7.json.gz"
#: A real mini-swe-agent session of the dev set: OpenAI Chat Completions messages.
CHAT_LIST = DATA / "sqlfluff__sqlfluff-2419.json.gz"


def load(path: Path) -> Any:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def blocks(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Every content block of ``kind`` in a Messages list."""
    return [b for m in messages if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == kind]


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e.type == kind]
