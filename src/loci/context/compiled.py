"""The result of compiling context: layers, the rendered prompt, and the explain view."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from loci.apis import anthropic, chat, responses
from loci.apis.turn import THINKING_BLOCKS, Message, Text


@dataclass
class LayerReport:
    """What one layer contributed: tokens against its budget, items kept and dropped."""

    name: str
    section: str
    budget: int
    used: int = 0
    included: list[str] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    #: The start of each listed item's text, by item (what a memory id stands for).
    texts: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "section": self.section,
            "budget": self.budget,
            "used": self.used,
            "included": self.included,
            "dropped": [{"item": item, "reason": why} for item, why in self.dropped],
            "texts": self.texts,
        }


@dataclass(frozen=True)
class CompiledContext:
    """Context for one LLM call: a byte-stable static prefix, a dynamic system message,
    history messages and the current message."""

    model: str
    window: int
    budget: int
    static_prefix: str
    dynamic: str
    #: The history that fits (``context.render.events_to_turn``).
    messages: list[Message]
    retrieved: str
    message: str | None
    layers: list[LayerReport]
    total_tokens: int
    token_method: str
    warnings: list[str] = field(default_factory=list)

    @cached_property
    def history(self) -> list[dict[str, Any]]:
        """The history as OpenAI chat messages."""
        return chat.write_messages(self.messages)

    @property
    def prefix_hash(self) -> str:
        """Version hash of the static prefix: equal hashes mean a reusable cache."""
        return hashlib.sha256(self.static_prefix.encode()).hexdigest()[:16]

    def to_openai(self) -> list[dict[str, Any]]:
        """OpenAI chat messages: the static prefix, the dynamic context (a second system
        message), history, the retrieved context, then the current message."""
        # A guest's static prefix may be empty: no empty system message for it.
        messages: list[dict[str, Any]] = [{"role": "system", "content": text}
                                          for text in (self.static_prefix, self.dynamic) if text]
        messages.extend(self.history)
        if self.retrieved:
            messages.append({"role": "system", "content": self.retrieved})
        if self.message is not None:
            messages.append({"role": "user", "content": self.message})
        return messages

    def to_responses(self) -> list[dict[str, Any]]:
        """OpenAI Responses input items in the order of ``to_openai``, the assistant
        turns' kept ``reasoning`` items before them (``apis.responses.to_input``)."""
        system = [Message("system", (Text(text),))
                  for text in (self.static_prefix, self.dynamic) if text]
        tail = [Message("system", (Text(self.retrieved),))] if self.retrieved else []
        if self.message is not None:
            tail.append(Message("user", (Text(self.message),)))
        return responses.to_input([*system, *self.messages, *tail])

    def to_anthropic(self, *, thinking: bool = False, compaction: bool = False
                     ) -> dict[str, Any]:
        """Anthropic Messages: ``system`` blocks with ``cache_control`` on the static
        prefix (and on the dynamic block, which changes rarely), then the messages, the
        history's last block marked too (the next call, whose history extends this one,
        reads it all from the cache); the retrieved context rides in front of the
        current message. With ``thinking``, assistant turns keep their signed thinking
        blocks, with ``compaction`` the provider's compaction blocks (``apis.anthropic``)."""
        # Anthropic refuses empty text blocks (a guest's static prefix may be empty).
        system: list[dict[str, Any]] = [
            {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
            for text in (self.static_prefix, self.dynamic) if text]
        messages = anthropic.to_messages(self.messages, thinking=thinking,
                                        compaction=compaction)
        if messages and messages[-1]["content"]:
            last = messages[-1]["content"][-1]
            if last.get("type") not in THINKING_BLOCKS:  # those take no cache mark
                messages[-1]["content"][-1] = {**last, "cache_control": {"type": "ephemeral"}}
        tail = [t for t in (self.retrieved, self.message) if t]
        if tail:
            block = {"type": "text", "text": "\n\n".join(tail)}
            if messages and messages[-1]["role"] == "user":
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
        return {"system": system, "messages": messages}

    def to_text(self) -> str:
        parts = [f"[system]\n{self.static_prefix}"]
        if self.dynamic:
            parts.append(f"[system]\n{self.dynamic}")
        for m in self.history:
            parts.append(f"[{m['role']}]\n{_message_text(m)}")
        if self.retrieved:
            parts.append(f"[system]\n{self.retrieved}")
        if self.message is not None:
            parts.append(f"[user]\n{self.message}")
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "window": self.window,
            "budget": self.budget,
            "total_tokens": self.total_tokens,
            "token_method": self.token_method,
            "prefix_hash": self.prefix_hash,
            "warnings": self.warnings,
            "messages": self.to_openai(),
            "layers": [layer.to_dict() for layer in self.layers],
        }

    def explain(self) -> str:
        """A human-readable account of every layer: tokens, budget, kept and dropped."""
        lines = [
            f"model {self.model}: window {self.window:,} tokens, budget {self.budget:,}, "
            f"used {self.total_tokens:,} ({self.token_method})",
            f"static prefix hash {self.prefix_hash}",
        ]
        for layer in self.layers:
            lines.append(
                f"- {layer.section}/{layer.name}: {layer.used:,}/{layer.budget:,} tokens, "
                f"{len(layer.included)} included, {len(layer.dropped)} dropped"
            )
            lines.extend(f"    + {item}" for item in layer.included)
            lines.extend(f"    - {item} ({why})" for item, why in layer.dropped)
        lines.extend(f"! {warning}" for warning in self.warnings)
        return "\n".join(lines)


def _message_text(message: dict[str, Any]) -> str:
    if message.get("tool_calls"):
        calls = [
            f"{c['function']['name']}({c['function']['arguments']})"
            for c in message["tool_calls"]
        ]
        return "calls " + ", ".join(calls)
    return str(message.get("content") or "")

