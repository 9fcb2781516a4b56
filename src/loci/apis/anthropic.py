"""Anthropic's Messages API: requests and answers (streams: ``anthropic_stream``).

- A client's messages (``read_message``): ``tool_use`` blocks become the assistant's
  tool calls, ``tool_result`` blocks ``tool`` messages, signed ``thinking`` and
  ``compaction`` blocks are kept whole (``ProviderBlock``), images and documents
  stay as the client sent them (``apis.media``); its tools (``tools``) as it declared
  them, Anthropic's own tool types (the memory tool, web search) and ``cache_control``
  included.
- A request to a Messages upstream (``request_body``): Loci's context as
  cache-controlled system blocks and messages (``CompiledContext.to_anthropic``), the
  client's tools as they came (another API's as Anthropic definitions), ``tool_choice``
  and ``parallel_tool_calls`` as Anthropic's ``tool_choice``, within Anthropic's limit of
  cache breakpoints (``limit_breakpoints``).
- An answer (``answer``): text, ``tool_use`` blocks as tool calls, ``thinking`` and
  ``redacted_thinking`` and ``compaction`` blocks whole (``Completion.blocks``): recorded
  with the turn, they go back before its text and tool calls whenever a request enables
  thinking, as Anthropic requires of the assistant turn whose tool results follow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from loci.apis import chat
from loci.apis.media import anthropic_blocks, split_media
from loci.apis.shapes import AnthropicMessage, AnthropicTurn, AnthropicUsage, ChatToolCall
from loci.apis.turn import (
    COMPACTION_BLOCKS,
    COMPACTS,
    THINKING_BLOCKS,
    Completion,
    Media,
    Message,
    Part,
    ProviderBlock,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolResult,
)
from loci.apis.wire import JSON, JSONObject, mapping, read_usage
from loci.errors import ValidationError
from loci.models import Usage

if TYPE_CHECKING:  # the context renders itself with the API modules
    from loci.context.compiled import CompiledContext

#: Anthropic blocks kept as they came: signed thinking, and the summary of the
#: provider's own compaction (``compact_20260112``), round-tripped verbatim.
KEPT_BLOCKS = ("thinking", "redacted_thinking", "compaction")
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                "tool_use": "tool_calls"}
#: OpenAI finish reasons as Messages stop reasons.
STOPS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
#: Anthropic needs max_tokens; this is used when the client gives none.
ANTHROPIC_MAX_TOKENS = 4096
#: The ``cache_control`` marks Anthropic accepts in one request.
MAX_BREAKPOINTS = 4
#: Messages parameters passed on as the client sent them (``context_management``: the
#: client's own edits of the context Loci sends, e.g. clearing old tool uses).
_PASSED = ("temperature", "top_p", "top_k", "thinking", "service_tier", "context_management",
           "metadata")


# -- the client's request ----------------------------------------------------------------

def system_message(system: str | Sequence[Mapping[str, Any]]) -> Message:
    """A Messages request's ``system`` (text, or text blocks with their
    ``cache_control``) as the turn's system message."""
    if isinstance(system, str):
        return Message("system", chat.system_texts(system))
    texts = [{**block, "text": block_text(block)} for block in system]
    return Message("system", chat.system_texts(texts))


def system_block(text: Text) -> JSONObject:
    """A system text as Anthropic's text block (with the client's cache mark)."""
    block: JSONObject = {"type": "text", "text": text.text}
    if text.cache_control:
        block["cache_control"] = text.cache_control
    return block


def block_text(block: Any) -> str:
    if not isinstance(block, Mapping) or block.get("type") != "text":
        kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
        raise ValidationError(f"content blocks of type {kind!r} are not supported by "
                              "Loci yet: send text, tool_use and tool_result blocks")
    return str(block.get("text") or "")


def read_message(message: Mapping[str, Any]) -> list[Message]:
    """One Messages message as the turn's messages: tool results become ``tool``
    messages, an assistant's ``tool_use`` blocks its tool calls, its signed thinking
    and compaction blocks provider blocks."""
    role, content = message.get("role"), message.get("content")
    if role not in ("user", "assistant"):
        raise ValidationError("each message's role must be 'user' or 'assistant'")
    if isinstance(content, str):
        return [Message(role, (Text(content),) if content else ())]
    if not isinstance(content, list):
        raise ValidationError("a message's content must be a string or a list of blocks")
    texts: list[str] = []
    parts: list[Part] = []
    results: list[Message] = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind in KEPT_BLOCKS and role == "assistant":
            parts.append(ProviderBlock(dict(block)))
        elif kind in ("image", "document") and role == "user":
            parts.append(Media(dict(block)))
        elif kind == "tool_use" and role == "assistant":
            parts.append(ToolCall(str(block.get("id") or ""), str(block.get("name") or ""),
                                  json.dumps(block.get("input") or {})))
        elif kind == "tool_result" and role == "user":
            results.append(Message("tool", (ToolResult(str(block.get("tool_use_id")),
                                                       result_content(block.get("content"))),)))
        else:
            texts.append(block_text(block))
    text = "\n".join(t for t in texts if t)
    said = ((Text(text),) if text else ()) + tuple(parts)
    if role == "assistant":
        return [Message("assistant", said)]
    return results + ([Message("user", said)] if said or not results else [])


def result_content(content: Any) -> tuple[Text | Media, ...]:
    """A tool result's content: its text, then its images and documents (which go to
    the upstream with the results, ``apis.media``)."""
    if isinstance(content, str) or content is None:
        return (Text(content),) if content else ()
    if not isinstance(content, list):
        raise ValidationError("a tool_result's content must be a string or a list of blocks")
    texts, media = split_media(content)
    text = "\n".join(block_text(block) for block in texts)
    return ((Text(text),) if text else ()) + tuple(Media(part) for part in media)


def chat_messages(message: Mapping[str, Any]) -> list[JSONObject]:
    """One Messages message as the chat messages it means (for replaying a transcript)."""
    return chat.write_messages(read_message(message))


def tools(declared: Sequence[Mapping[str, Any]]) -> tuple[Tool, ...]:
    """A Messages request's ``tools``, each kept as it came."""
    out = []
    for tool in declared:
        if not isinstance(tool.get("name"), str):
            raise ValidationError("each tool needs a name and an input_schema")
        out.append(Tool("anthropic", tool, tool["name"], tool.get("description") or None,
                        tool.get("input_schema") or {"type": "object"}))
    return tuple(out)


def chat_tool_choice(choice: Mapping[str, Any] | None) -> JSONObject:
    """A Messages ``tool_choice`` as the chat parameters it means."""
    if not choice:
        return {}
    kinds = {"auto": "auto", "any": "required", "none": "none"}
    kind = choice.get("type")
    params: JSONObject = {}
    if kind == "tool" and isinstance(choice.get("name"), str):
        params["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif kind in kinds:
        params["tool_choice"] = kinds[str(kind)]
    else:
        raise ValidationError("tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} "
                              "or {\"type\": \"tool\", \"name\": ...}")
    if choice.get("disable_parallel_tool_use"):
        params["parallel_tool_calls"] = False
    return params


# -- the request to a Messages upstream --------------------------------------------------

def to_messages(history: Sequence[Message], *, thinking: bool = False,
                compaction: bool = False) -> list[AnthropicTurn]:
    """Loci's history as Anthropic Messages: tool calls become ``tool_use`` blocks,
    tool results ``tool_result`` blocks in a user turn, and same-role turns merge. With
    ``thinking`` (the request enables it), an assistant turn starts with the thinking
    blocks it was answered with, as they came; with ``compaction`` (the request asks
    the provider to compact), with its compaction block."""
    wanted = (THINKING_BLOCKS if thinking else ()) + (COMPACTION_BLOCKS if compaction else ())
    out: list[AnthropicTurn] = []
    for message in history:
        role: str = message.role
        kept = [dict(b.original) for b in message.blocks
                if b.original.get("type") in wanted] if role == "assistant" else None
        if kept:
            _append(out, "assistant", kept)
        if message.result is not None:
            block: JSONObject = {"type": "tool_result",
                                     "tool_use_id": message.result.call_id,
                                     "content": message.text}
            role = "user"
        elif message.calls:
            blocks: list[JSONObject] = []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name,
                        "input": json.loads(str(c.arguments or "{}"))}
                       for c in message.calls]
            _append(out, "assistant", blocks)
            continue
        else:
            role = "assistant" if role == "assistant" else "user"
            block = {"type": "text", "text": message.text}
        _append(out, role, [block])
    return out


def _append(out: list[AnthropicTurn], role: str, blocks: list[JSONObject]) -> None:
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def request_body(request: Request, *, stream: bool) -> JSONObject:
    """The Messages request for ``request``: Loci's context, the client's system
    messages first, and the client's parameters translated."""
    params = request.params
    thinking = mapping(params.get("thinking")).get("type") in ("enabled", "adaptive")
    edits = mapping(params.get("context_management")).get("edits") or ()
    compacting = any(str(mapping(e).get("type")).startswith(COMPACTS) for e in edits)
    definitions = [tool_definition(tool) for tool in request.tools]
    body: JSONObject = {
        "model": request.model,
        **context_request(request.context, request.system, request.attachments,
                          thinking=thinking, compaction=compacting, tools=definitions),
        "max_tokens": params.get("max_tokens") or params.get("max_completion_tokens")
        or ANTHROPIC_MAX_TOKENS,
    }
    for name in _PASSED:
        if params.get(name) is not None:
            body[name] = params[name]
    stop = params.get("stop")  # a string or strings, as the faces check it
    if stop:
        body["stop_sequences"] = ([stop] if isinstance(stop, str)
                                  else list(cast("Sequence[str]", stop)))
    if definitions:
        choice = tool_choice(params.get("tool_choice"), params.get("parallel_tool_calls"))
        if choice is not None:
            body["tool_choice"] = choice
    if stream:
        body["stream"] = True
    return body


def context_request(context: CompiledContext, system: Sequence[Mapping[str, Any]],
                    attachments: Sequence[Mapping[str, Any]] = (), *, thinking: bool = False,
                    compaction: bool = False, tools: Sequence[JSONObject] = ()
                    ) -> JSONObject:
    """Messages ``system`` and ``messages`` (and ``tools`` if given) for a compiled
    ``context``: the client's system text first (Loci is a guest in its agent), the
    attachments after the new message's text."""
    rendered = context.to_anthropic(thinking=thinking, compaction=compaction)
    own = [dict(block) for block in system]
    messages = rendered["messages"]
    history = [b for m in messages for b in m["content"] if "cache_control" in b]
    if attachments:
        messages[-1]["content"] += anthropic_blocks(attachments)
    system_blocks: list[JSONObject] = own + rendered["system"]
    body: JSONObject = {"system": system_blocks, "messages": messages}
    if tools:
        body["tools"] = list(tools)
    limit_breakpoints(system_blocks, len(own), tools, messages, history)
    return body


def limit_breakpoints(system: list[JSONObject], own: int, tools: Sequence[JSONObject],
                      messages: Sequence[AnthropicTurn], history: Sequence[JSONObject]
                      ) -> None:
    """At most ``MAX_BREAKPOINTS`` ``cache_control`` marks in all, Anthropic's limit:
    Loci's first system block and the end of its ``history`` keep their marks, the
    client's marks (on its tools, its ``own`` first system blocks, its attachments)
    come next, latest first, and Loci's second system block keeps its mark if there is
    room left."""
    loci = [b for b in system[own:] if "cache_control" in b]
    kept = len(loci[:1]) + len(history)
    blocks = [*tools, *system[:own], *(b for m in messages for b in m["content"])]
    clients = [b for b in blocks if "cache_control" in b and not any(b is h for h in history)]
    for block in clients[:max(0, len(clients) - (MAX_BREAKPOINTS - kept))]:
        del block["cache_control"]
    if kept + len(clients) + len(loci[1:]) > MAX_BREAKPOINTS:
        for block in loci[1:]:
            del block["cache_control"]


def tool_definition(tool: Tool) -> JSONObject:
    """``tool`` as Anthropic's ``{"name", "description", "input_schema"}`` (a Messages
    client's as it came)."""
    if tool.api == "anthropic":
        return dict(tool.original)
    if tool.name is None:
        raise ValidationError("each tool must be {\"type\": \"function\", \"function\": "
                              "{\"name\": ..., \"parameters\": {...}}}")
    schema: JSON = tool.parameters or {"type": "object", "properties": {}}
    if not isinstance(schema, Mapping):
        raise ValidationError(f"tool {tool.name!r}: parameters must be a JSON schema "
                              "object")
    definition: JSONObject = {"name": tool.name, "input_schema": schema}
    if tool.description:
        definition["description"] = tool.description
    return definition


def tool_choice(choice: Any, parallel: Any) -> JSONObject | None:
    """OpenAI ``tool_choice`` (and ``parallel_tool_calls``) as Anthropic's, or None for
    the upstream's default (auto, parallel calls allowed)."""
    if choice is None or choice == "auto":
        out: JSONObject = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        return {"type": "none"}
    elif isinstance(choice, Mapping) and isinstance(mapping(choice.get("function"))
                                                    .get("name"), str):
        out = {"type": "tool", "name": choice["function"]["name"]}
    else:
        raise ValidationError("tool_choice must be \"auto\", \"required\", \"none\" or "
                              "{\"type\": \"function\", \"function\": {\"name\": ...}}")
    if parallel is False:
        out["disable_parallel_tool_use"] = True
    elif out == {"type": "auto"}:
        return None
    return out


# -- answers -----------------------------------------------------------------------------

def answer(payload: Mapping[str, Any]) -> Completion:
    """A Messages payload: its text blocks, ``tool_use`` blocks as tool calls."""
    blocks = [b for b in payload.get("content") or () if isinstance(b, dict)]
    return Completion(
        content="".join(str(b["text"]) for b in blocks
                        if b.get("type") == "text" and isinstance(b.get("text"), str)),
        finish_reason=STOP_REASONS.get(str(payload.get("stop_reason")), "stop"),
        usage=read_usage(payload.get("usage")),
        tool_calls=calls(blocks) or None,
        id=payload.get("id") if isinstance(payload.get("id"), str) else None,
        blocks=[b for b in blocks if b.get("type") in KEPT_BLOCKS] or None,
    )


def calls(blocks: Any) -> list[ChatToolCall]:
    """The ``tool_use`` blocks of a Messages answer as tool calls."""
    return [{"id": block.get("id"), "type": "function",
             "function": {"name": block.get("name"),
                          "arguments": json.dumps(block.get("input") or {})}}
            for block in blocks or ()
            if isinstance(block, dict) and block.get("type") == "tool_use"]


def tool_blocks(tool_calls: Sequence[Mapping[str, Any]] | None) -> list[JSONObject]:
    """Tool calls as ``tool_use`` blocks."""
    blocks: list[JSONObject] = []
    for call in tool_calls or ():
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):  # input is an object: "null", "[1, 2]" kept
            arguments = {"arguments": raw}  # as the log keeps them (``turns._arguments``)
        blocks.append({"type": "tool_use", "id": call.get("id") or "",
                       "name": function.get("name") or "", "input": arguments})
    return blocks


def usage(spent: Usage) -> AnthropicUsage:
    """Anthropic's ``usage``: its ``input_tokens`` are those neither read from the cache
    nor written to it."""
    return {"input_tokens": spent.uncached_tokens,
            "cache_read_input_tokens": spent.cached_tokens,
            "cache_creation_input_tokens": spent.cache_write_tokens,
            "output_tokens": spent.output_tokens}


def message(reply_id: str, model: str, clean: str, answered: Completion, spent: Usage
            ) -> AnthropicMessage:
    """The client's ``message``: kept blocks, the clean text, the tool calls."""
    content: list[JSONObject] = ([{"type": "text", "text": clean}]
                                 if clean or not answered.tool_calls else [])
    return {"id": reply_id, "type": "message", "role": "assistant", "model": model,
            "content": (answered.blocks or []) + content + tool_blocks(answered.tool_calls),
            "stop_reason": STOPS.get(answered.finish_reason, "end_turn"),
            "stop_sequence": None, "usage": usage(spent)}
