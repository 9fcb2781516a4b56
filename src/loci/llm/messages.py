"""A client's messages, in the shape of the API it speaks, read as chat-completions
messages: the one shape the proxy's faces and ``Loci.turn`` work with.

- Anthropic Messages (``from_anthropic``): ``tool_use`` blocks become the assistant's
  ``tool_calls``, ``tool_result`` blocks ``tool`` messages, signed ``thinking`` and
  ``compaction`` blocks are kept whole under ``PROVIDER_BLOCKS``, images and documents
  stay as the client sent them (``llm.media``).
- OpenAI Responses input items (``add_responses_item``): ``function_call`` items join the
  assistant message before them, ``function_call_output`` items become ``tool``
  messages, ``input_image``/``input_file`` parts chat content parts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from loci.errors import ValidationError
from loci.llm.answers import KEPT_BLOCKS
from loci.llm.media import split_media
from loci.llm.wire import mapping

#: The metadata key under which an event keeps the provider's blocks of its turn.
PROVIDER_BLOCKS = "provider_blocks"


def system_blocks(content: Any) -> list[dict[str, Any]]:
    """A system message's content as text blocks (empty text left out); a text part's
    ``cache_control`` (the Messages face's) is kept."""
    parts = content if isinstance(content, list) else [content]
    blocks = []
    for part in parts:
        text = part if isinstance(part, str) else mapping(part).get("text")
        if isinstance(text, str) and text.strip():
            block: dict[str, Any] = {"type": "text", "text": text}
            if isinstance(part, Mapping) and part.get("cache_control"):
                block["cache_control"] = part["cache_control"]
            blocks.append(block)
    return blocks


def system_content(system: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """The system prompt as one system message's content: text blocks keep their
    ``cache_control`` (``system_blocks``)."""
    if isinstance(system, str):
        return system
    return [{**block, "text": block_text(block)} for block in system]


def block_text(block: Any) -> str:
    if not isinstance(block, Mapping) or block.get("type") != "text":
        kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
        raise ValidationError(f"content blocks of type {kind!r} are not supported by "
                              "Loci yet: send text, tool_use and tool_result blocks")
    return str(block.get("text") or "")


def from_anthropic(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One Messages message as chat-completions messages: tool results become ``tool``
    messages, an assistant's ``tool_use`` blocks its ``tool_calls``."""
    role, content = message.get("role"), message.get("content")
    if role not in ("user", "assistant"):
        raise ValidationError("each message's role must be 'user' or 'assistant'")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise ValidationError("a message's content must be a string or a list of blocks")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in KEPT_BLOCKS and role == "assistant":
            kept.append(dict(block))
        elif kind in ("image", "document") and role == "user":
            media.append(dict(block))
        elif kind == "tool_use" and role == "assistant":
            calls.append({"id": str(block.get("id") or ""), "type": "function",
                          "function": {"name": str(block.get("name") or ""),
                                       "arguments": json.dumps(block.get("input") or {})}})
        elif kind == "tool_result" and role == "user":
            results.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id")),
                            "content": result_content(block.get("content"))})
        else:
            texts.append(block_text(block))
    text = "\n".join(t for t in texts if t)
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": text}
        if kept:
            out[PROVIDER_BLOCKS] = kept
        return [{**out, "tool_calls": calls}] if calls else [out]
    parts = [{"type": "text", "text": text}, *media] if media else text
    return results + ([{"role": "user", "content": parts}] if text or media or not results
                      else [])


def result_content(content: Any) -> str | list[dict[str, Any]]:
    """A tool result's content: its text, then its images and documents (which go to
    the upstream with the results, ``llm.media``)."""
    if isinstance(content, str) or content is None:
        return content or ""
    if not isinstance(content, list):
        raise ValidationError("a tool_result's content must be a string or a list of blocks")
    texts, media = split_media(content)
    text = "\n".join(block_text(block) for block in texts)
    return [{"type": "text", "text": text}, *media] if media else text


def add_responses_item(messages: list[dict[str, Any]], item: Mapping[str, Any]) -> None:
    """One input item as chat messages: function calls join the assistant message
    before them, their outputs become ``tool`` messages."""
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise ValidationError(f"unknown message role {role!r}")
        messages.append({"role": "system" if role == "developer" else role,
                         "content": item_content(item.get("content"))})
    elif kind == "function_call":
        call = {"id": str(item.get("call_id") or ""), "type": "function",
                "function": {"name": str(item.get("name") or ""),
                             "arguments": str(item.get("arguments") or "{}")}}
        last = messages[-1] if messages else None
        if last is not None and last.get("role") == "assistant" and not _has_results(
                messages):
            last.setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    elif kind in ("reasoning", "compaction"):
        # A reasoning model's own items (a chat-completions upstream has no use for
        # them); a compaction item of ``/responses/compact``: Loci's log holds what it
        # stands for.
        pass
    elif kind == "function_call_output":
        output = item.get("output")
        messages.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                         "content": output if isinstance(output, str) else json.dumps(output)})
    else:
        raise ValidationError(f"input items of type {kind!r} are not supported by Loci "
                              "yet: send messages, function_call and function_call_output "
                              "items")


def _has_results(messages: list[dict[str, Any]]) -> bool:
    return bool(messages) and messages[-1].get("role") == "tool"


def item_content(content: Any) -> str | list[dict[str, Any]]:
    """A message's content as chat content: its text, and its images and files as chat
    content parts after it (``llm.media``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationError("a message's content must be text or a list of parts")
    texts, media = [], []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("input_text", "output_text", "text"):
            texts.append(str(part.get("text") or ""))
        elif kind in ("input_image", "input_file"):
            media.append(_media_part(part))
        else:
            raise ValidationError(f"content parts of type {kind!r} are not supported by "
                                  "Loci: send text, images and files")
    text = "\n".join(texts)
    return [{"type": "text", "text": text}, *media] if media else text


def _media_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """An ``input_image`` or ``input_file`` part as a chat content part."""
    if part.get("type") == "input_image":
        if not isinstance(part.get("image_url"), str):
            raise ValidationError("send an input_image with its image_url (a URL or a data: "
                                  "URL); file ids are not supported")
        image: dict[str, Any] = {"url": part["image_url"]}
        if part.get("detail"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    file = {k: part[k] for k in ("file_data", "file_id", "filename") if part.get(k)}
    if not file.get("file_data") and not file.get("file_id"):
        raise ValidationError("send an input_file with its file_data (a data: URL)")
    return {"type": "file", "file": file}
