"""Anthropic's Messages streams, read (``deltas``) and written (``Blocks``, ``event``).

Read: each ``tool_use`` block's start gives the call's id and name and its
``input_json_delta`` pieces the arguments, as OpenAI streams them; ``thinking``,
``redacted_thinking`` and ``compaction`` blocks come out whole once they end, with their
signatures. Written: the published event sequence (``message_start``, content blocks
with their deltas, ``message_delta``, ``message_stop``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from loci.apis.anthropic import KEPT_BLOCKS, STOP_REASONS
from loci.apis.turn import Delta
from loci.apis.wire import JSONObject, mapping, read_usage
from loci.models import Usage


def deltas(events: Iterable[tuple[str, JSONObject]]) -> Iterator[Delta]:
    """A Messages stream's ``(event type, data)`` pairs as the turn's deltas."""
    return StreamReader().read(events)


class StreamReader:
    """Reads one Messages stream, a batch of events at a time (what it learned of the
    stream so far, its prompt's usage, its tool calls and the blocks being kept, carries
    over from one batch to the next)."""

    def __init__(self) -> None:
        self.prompt = Usage()
        self.calls: dict[Any, int] = {}  # content block index -> tool call index
        self.kept: dict[Any, JSONObject] = {}  # content block index -> block kept

    def read(self, events: Iterable[tuple[str, JSONObject]]) -> Iterator[Delta]:
        calls, kept = self.calls, self.kept
        for kind, data in events:
            if kind == "message_start":
                self.prompt = read_usage(mapping(data.get("message")).get("usage"))
            elif kind == "content_block_start":
                block = mapping(data.get("content_block"))
                if block.get("type") == "tool_use":
                    index = calls[data.get("index")] = len(calls)
                    yield Delta(tool_calls=[{
                        "index": index, "id": block.get("id"), "type": "function",
                        "function": {"name": block.get("name"), "arguments": ""}}])
                elif block.get("type") in KEPT_BLOCKS:
                    kept[data.get("index")] = dict(block)
            elif kind == "content_block_delta" and data.get("index") in kept:
                _grow(kept[data.get("index")], mapping(data.get("delta")))
            elif kind == "content_block_stop" and data.get("index") in kept:
                yield Delta(blocks=[kept.pop(data.get("index"))])
            elif kind == "content_block_delta":
                yield _content_delta(data, calls)
            elif kind == "message_delta":
                yield self._finish(data)

    def _finish(self, data: Mapping[str, Any]) -> Delta:
        delta = mapping(data.get("delta"))
        reason = STOP_REASONS.get(str(delta.get("stop_reason")), "stop")
        # Its usage counts are cumulative: the output's, and maybe the input's.
        final, prompt = read_usage(data.get("usage")), self.prompt
        return Delta(finish_reason=reason, usage=Usage(
            prompt.input_tokens, prompt.cached_tokens, prompt.cache_write_tokens,
            final.output_tokens))


def _grow(block: JSONObject, delta: Mapping[str, Any]) -> None:
    """Add a streamed piece to a kept block: its thinking text or its signature, or a
    compaction block's summary and opaque content (each delta holds them whole)."""
    for field, kind in (("thinking", "thinking_delta"), ("signature", "signature_delta")):
        if delta.get("type") == kind and isinstance(delta.get(field), str):
            block[field] = str(block.get(field) or "") + delta[field]
    if delta.get("type") == "compaction_delta":
        block.update(content=delta.get("content"),
                     encrypted_content=delta.get("encrypted_content"))


def _content_delta(data: Mapping[str, Any], calls: Mapping[Any, int]) -> Delta:
    """A ``content_block_delta``: text, or a piece of a tool call's arguments."""
    delta = mapping(data.get("delta"))
    if delta.get("type") == "input_json_delta":
        index = calls.get(data.get("index"))
        piece = delta.get("partial_json")
        if index is not None and isinstance(piece, str) and piece:
            return Delta(tool_calls=[{"index": index, "function": {"arguments": piece}}])
        return Delta()
    text = delta.get("text") if delta.get("type") == "text_delta" else ""
    return Delta(content=text if isinstance(text, str) else "")


def event(kind: str, data: Mapping[str, Any]) -> bytes:
    """One Server-Sent Event of a Messages stream."""
    payload = json.dumps({"type": kind, **data}, ensure_ascii=False)
    return f"event: {kind}\ndata: {payload}\n\n".encode()


class Blocks:
    """The content blocks of a streamed message, numbered as they are opened: whole
    blocks (thinking, tool use) at once, the text block kept open while text arrives."""

    def __init__(self) -> None:
        self.index = 0
        self.open_text = False
        self.texts = 0

    def whole(self, block: Mapping[str, Any], arguments: str | None = None
              ) -> Iterator[bytes]:
        """A whole block: a thinking block with its text and signature as deltas, a
        compaction block with its content as one delta, or a tool-use block with its
        input as one JSON delta."""
        yield from self._close_text()
        start = dict(block)
        pieces = []
        if block.get("type") == "thinking":
            start.update(thinking="", signature="")
            pieces = [{"type": "thinking_delta", "thinking": block.get("thinking") or ""},
                      {"type": "signature_delta", "signature": block.get("signature") or ""}]
        elif block.get("type") == "compaction":
            start.update(content=None, encrypted_content=None)
            pieces = [{"type": "compaction_delta", "content": block.get("content"),
                       "encrypted_content": block.get("encrypted_content")}]
        elif arguments is not None:
            pieces = [{"type": "input_json_delta", "partial_json": arguments}]
        yield event("content_block_start", {"index": self.index, "content_block": start})
        for piece in pieces:
            yield event("content_block_delta", {"index": self.index, "delta": piece})
        yield event("content_block_stop", {"index": self.index})
        self.index += 1

    def text(self, text: str, *, last: bool = False) -> Iterator[bytes]:
        """Text for the text block (opened first if need be); ``last`` closes it, and
        a message without any text still gets its (empty) text block."""
        if (text or (last and not self.texts)) and not self.open_text:
            yield event("content_block_start", {
                "index": self.index, "content_block": {"type": "text", "text": ""}})
            self.open_text, self.texts = True, self.texts + 1
        if text:
            yield event("content_block_delta", {
                "index": self.index, "delta": {"type": "text_delta", "text": text}})
        if last:
            yield from self._close_text()

    def _close_text(self) -> Iterator[bytes]:
        if self.open_text:
            yield event("content_block_stop", {"index": self.index})
            self.open_text = False
            self.index += 1
