"""Streaming a reply to the client without leaking its memory tags.

The upstream's text arrives in pieces; ``[MEMORY:type]…[/MEMORY]`` and
``[STATE:key]…[/STATE]`` tags must reach the store, not the client. :class:`TagFilter`
holds text back from any ``[`` that may still turn out to be a tag: an opening tag
whose closing tag has not arrived, or a ``[`` with no ``]`` after it yet. It also
holds trailing whitespace, which removing a later tag may swallow. Everything before
that point is cleaned with the same parser that ``Loci.add_reply`` uses
(``memory.tags.parse_reply``) and the new part of the clean text is released, so the
client receives, piece by piece, exactly the text that is recorded. Text without
brackets streams with no delay; text after an unclosed ``[`` waits for its ``]``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from loci.memory.tags import parse_reply

_OPEN = re.compile(r"\[\s*(memory|state)\s*:[^\]\n]*\]", re.IGNORECASE)
_CLOSE = {"memory": re.compile(r"\[\s*/\s*memory\s*\]", re.IGNORECASE),
          "state": re.compile(r"\[\s*/\s*state\s*\]", re.IGNORECASE)}


class TagFilter:
    """Feed raw text in, get clean text out; ``finish`` releases the rest."""

    def __init__(self) -> None:
        self.raw = ""
        self.sent = ""

    def feed(self, text: str) -> str:
        self.raw += text
        return self._release(parse_reply(self.raw[: self._safe_end()]).clean)

    def finish(self, clean: str) -> str:
        """The rest of ``clean`` (the recorded reply, cleaned by ``add_reply``)."""
        return self._release(clean)

    def _release(self, clean: str) -> str:
        # Removing a tag never changes text before it, so the clean text of a longer
        # prefix extends the shorter one's; anything else waits for the end.
        if not clean.startswith(self.sent):
            return ""
        new, self.sent = clean[len(self.sent):], clean
        return new

    def _safe_end(self) -> int:
        raw = self.raw
        end = len(raw)
        last_open = raw.rfind("[")
        if last_open != -1 and "]" not in raw[last_open:]:
            end = last_open
        for match in _OPEN.finditer(raw, 0, end):
            if not _CLOSE[match.group(1).lower()].search(raw, match.end()):
                end = match.start()
                break
        while end and raw[end - 1].isspace():
            end -= 1
        return end


def sse(data: dict[str, Any] | str) -> bytes:
    """One Server-Sent Event carrying ``data`` (JSON unless it is a string)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def chunk(base: dict[str, Any], delta: dict[str, Any], finish_reason: str | None = None
          ) -> dict[str, Any]:
    """An OpenAI ``chat.completion.chunk`` with one choice."""
    return {**base, "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
