"""The proxy's Anthropic upstream: OpenAI chat-completion requests translated to the
Messages API and its answers translated back, tool use included.

Out: Loci's context as cache-controlled system blocks and messages
(``CompiledContext.to_anthropic``, where recorded tool calls and results are already
``tool_use`` / ``tool_result`` blocks), the client's ``tools`` as Anthropic tool
definitions and ``tool_choice`` / ``parallel_tool_calls`` as Anthropic's ``tool_choice``.
Back: ``tool_use`` blocks become OpenAI ``tool_calls``; streamed, each block's start
gives the call's id and name and its ``input_json_delta`` pieces the arguments, as
OpenAI streams them. ``thinking`` and ``redacted_thinking`` blocks come back whole, with
their signatures (``Completion.blocks``): recorded with the turn, they go back before
its text and tool calls whenever a request enables thinking, as Anthropic requires of
the assistant turn whose tool results follow.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from loci.context.render import COMPACTS
from loci.context.requests import anthropic_request
from loci.errors import ValidationError
from loci.llm.answers import KEPT_BLOCKS, STOP_REASONS, Completion, anthropic_answer
from loci.llm.anthropic import AnthropicChat, delta_text
from loci.llm.wire import mapping, read_usage
from loci.models import Usage
from loci.server.proxy_types import Delta, UpstreamRequest

#: Anthropic needs max_tokens; this is used when the client gives none.
ANTHROPIC_MAX_TOKENS = 4096
#: The key of a chat tool that holds the Messages face's own tool definition.
ANTHROPIC_TOOL = "anthropic_tool"
#: Messages parameters passed on as the client sent them (``context_management``: the
#: client's own edits of the context Loci sends, e.g. clearing old tool uses).
_PASSED = ("temperature", "top_p", "top_k", "thinking", "service_tier", "context_management",
           "metadata")


class AnthropicUpstream:
    """The Anthropic Messages API behind the OpenAI-compatible proxy."""

    def __init__(self, chat: AnthropicChat) -> None:
        self.chat = chat

    def complete(self, request: UpstreamRequest) -> Completion:
        return anthropic_answer(self.chat.send(request_body(request, stream=False),
                                               _headers(request)))

    def stream(self, request: UpstreamRequest) -> Iterator[Delta]:
        prompt = Usage()
        calls: dict[Any, int] = {}  # content block index -> tool call index
        kept: dict[Any, dict[str, Any]] = {}  # content block index -> block being kept
        for kind, data in self.chat.send_stream(request_body(request, stream=True),
                                                _headers(request)):
            if kind == "message_start":
                prompt = read_usage(mapping(data.get("message")).get("usage"))
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
                delta = mapping(data.get("delta"))
                reason = STOP_REASONS.get(str(delta.get("stop_reason")), "stop")
                # Its usage counts are cumulative: the output's, and maybe the input's.
                final = read_usage(data.get("usage"))
                yield Delta(finish_reason=reason, usage=Usage(
                    prompt.input_tokens, prompt.cached_tokens, prompt.cache_write_tokens,
                    final.output_tokens))

    def close(self) -> None:
        self.chat.close()


def _headers(request: UpstreamRequest) -> dict[str, str] | None:
    return {"anthropic-beta": request.beta} if request.beta else None


def request_body(request: UpstreamRequest, *, stream: bool) -> dict[str, Any]:
    """The Messages request for ``request``: Loci's context, the client's system
    messages first, and the client's parameters translated."""
    params = request.params
    thinking = mapping(params.get("thinking")).get("type") in ("enabled", "adaptive")
    edits = mapping(params.get("context_management")).get("edits") or ()
    compacting = any(str(mapping(e).get("type")).startswith(COMPACTS) for e in edits)
    tools = [tool_definition(tool) for tool in params.get("tools") or ()]
    body: dict[str, Any] = {
        "model": request.model,
        **anthropic_request(request.context, request.system, request.attachments,
                            thinking=thinking, compaction=compacting, tools=tools),
        "max_tokens": params.get("max_tokens") or params.get("max_completion_tokens")
        or ANTHROPIC_MAX_TOKENS,
    }
    for name in _PASSED:
        if params.get(name) is not None:
            body[name] = params[name]
    stop = params.get("stop")
    if stop:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if tools:
        choice = tool_choice(params.get("tool_choice"), params.get("parallel_tool_calls"))
        if choice is not None:
            body["tool_choice"] = choice
    if stream:
        body["stream"] = True
    return body


def tool_definition(tool: Any) -> dict[str, Any]:
    """An OpenAI ``{"type": "function", "function": {...}}`` tool as Anthropic's
    ``{"name", "description", "input_schema"}`` (the Messages face's tools as they came)."""
    if isinstance(tool, Mapping) and isinstance(tool.get(ANTHROPIC_TOOL), Mapping):
        return dict(tool[ANTHROPIC_TOOL])
    function = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ValidationError("each tool must be {\"type\": \"function\", \"function\": "
                              "{\"name\": ..., \"parameters\": {...}}}")
    schema = function.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(schema, Mapping):
        raise ValidationError(f"tool {function['name']!r}: parameters must be a JSON schema "
                              "object")
    definition: dict[str, Any] = {"name": function["name"], "input_schema": schema}
    if function.get("description"):
        definition["description"] = function["description"]
    return definition


def tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    """OpenAI ``tool_choice`` (and ``parallel_tool_calls``) as Anthropic's, or None for
    the upstream's default (auto, parallel calls allowed)."""
    if choice is None or choice == "auto":
        out: dict[str, Any] = {"type": "auto"}
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


def _grow(block: dict[str, Any], delta: Mapping[str, Any]) -> None:
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
    return Delta(content=delta_text(data))
