"""The Anthropic Messages face of the proxy: ``POST /v1/messages`` (streaming and not)
and ``POST /v1/messages/count_tokens``, for clients of the Messages API (the
``anthropic`` SDK, ``ANTHROPIC_BASE_URL``).

A Messages request is read as the chat-completions request it means (system text,
messages with ``tool_use`` / ``tool_result`` blocks as tool calls and tool messages,
tools and ``tool_choice``) and goes through the same :class:`~loci.server.proxy.ProxyTurn`:
the same session rules, recording, tags and upstreams. The answer comes back in the
Messages shape: ``text`` and ``tool_use`` blocks, ``stop_reason``, ``usage``; streamed as
the published event sequence (``message_start``, content blocks with their deltas,
``message_delta``, ``message_stop``). The session is the ``X-Loci-Session`` header, else
the request's ``loci_session`` field (the SDK's ``extra_body``); the client's
``metadata`` is the provider's (an end user's id for abuse checks) and goes on to an
Anthropic upstream.
Keys come as ``x-api-key`` (the SDK's header) or a bearer token.

Extended thinking works as Anthropic specifies it: the upstream's signed ``thinking``
and ``redacted_thinking`` blocks are relayed to the client as they came and recorded
with the turn, so the next request (whose tool results answer that turn) carries them
back unchanged; a client's own thinking blocks are kept the same way for the turns Loci
did not relay. Images and documents of the new message go to the upstream with it
(``llm.media``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, cast

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse
from pydantic import Field, StrictBool, TypeAdapter, field_validator

from loci.errors import LociError, ValidationError
from loci.llm.answers import Completion
from loci.llm.messages import from_anthropic, system_content
from loci.llm.wire import message_text
from loci.models import Usage
from loci.server.proxy import (
    ChatRequest,
    Engine,
    ProxyTurn,
    Relay,
    chat_request,
    event_stream,
    started,
    upstream_for,
)
from loci.server.proxy_anthropic import ANTHROPIC_TOOL
from loci.server.proxy_requests import (
    ANTHROPIC_MESSAGES,
    ANTHROPIC_TOOLS,
    AnthropicMetadata,
    AnthropicTextBlock,
    AnthropicToolChoice,
    FaceRequest,
    checked,
)
from loci.server.proxy_types import Delta, Upstream
from loci.server.proxy_upstream import provider_of

router = APIRouter(tags=["proxy"])
#: OpenAI finish reasons as Messages stop reasons.
_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
#: Request fields read here, not passed on as parameters.
_OWN = frozenset({"model", "messages", "system", "stream", "metadata", "tools",
                  "tool_choice", "max_tokens", "stop_sequences", "loci_session"})
_SYSTEM: TypeAdapter[list[AnthropicTextBlock]] = TypeAdapter(list[AnthropicTextBlock])


class MessagesRequest(FaceRequest):
    """An Anthropic Messages request (``proxy_requests``); sampling fields Loci does not
    use pass through."""

    model: str = Field(min_length=1)
    #: Required by ``/messages``, not by ``/messages/count_tokens``.
    max_tokens: int | None = Field(None, ge=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    stream: StrictBool = False
    metadata: AnthropicMetadata | None = None
    #: The session, for a client that cannot send the ``X-Loci-Session`` header.
    loci_session: str | None = Field(None, min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: AnthropicToolChoice | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)

    @field_validator("messages")
    @classmethod
    def _messages(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], checked(ANTHROPIC_MESSAGES, value, "messages"))

    @field_validator("system")
    @classmethod
    def _system(cls, value: Any) -> Any:
        return value if not isinstance(value, list) else checked(_SYSTEM, value, "system")

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        return None if value is None else cast(list[dict[str, Any]],
                                               checked(ANTHROPIC_TOOLS, value, "tools"))

    def session(self, header: str | None) -> str:
        session = header or self.loci_session
        if not session:
            raise ValidationError(
                "name the session: send the header 'X-Loci-Session: <name>' (Claude Code: "
                "ANTHROPIC_CUSTOM_HEADERS='X-Loci-Session: <name>') or the field "
                "loci_session")
        return session

    def as_chat(self, *, to_anthropic: bool = False) -> ChatRequest:
        """The chat-completions request this one means (with the client's ``metadata``
        when it goes ``to_anthropic``)."""
        messages = ([{"role": "system", "content": system_content(self.system)}]
                    if self.system else [])
        for message in self.messages:
            messages += from_anthropic(message)
        given = self.model_dump(exclude_unset=True, exclude=set(_OWN))
        params: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if self.max_tokens:
            params["max_tokens"] = self.max_tokens
        if self.stop_sequences:
            params["stop"] = self.stop_sequences
        if self.metadata is not None and to_anthropic:
            # Anthropic's own field; OpenAI refuses a metadata without store.
            params["metadata"] = self.metadata.model_dump(exclude_none=True)
        if self.tools:
            params["tools"] = [_chat_tool(tool) for tool in self.tools]
            choice = self.tool_choice.model_dump(exclude_none=True) if self.tool_choice \
                else None
            params.update(_chat_tool_choice(choice))
        return chat_request(self.model, messages, params)


@router.post("/messages", response_model=None)
def messages(
    loci: Engine, body: MessagesRequest,
    x_loci_session: Annotated[str | None, Header()] = None,
    anthropic_beta: Annotated[str | None, Header()] = None,
) -> dict[str, Any] | StreamingResponse:
    """Anthropic's Messages API, with Loci's context in and memory out."""
    if body.max_tokens is None:
        raise ValidationError("max_tokens is required")
    session = body.session(x_loci_session)
    chat = body.as_chat(to_anthropic=provider_of(loci.settings) == "anthropic")
    reply_id = f"msg_loci_{secrets.token_hex(12)}"
    with upstream_for(loci, body.stream) as upstream:
        turn = ProxyTurn(loci, session, chat, beta=anthropic_beta, face="messages")
        if not body.stream:
            answer = turn.answer(upstream)
            clean = turn.record(answer.content, answer.tool_calls, answer.blocks)
            return _message(reply_id, body.model, clean, answer, turn.spent)
        deltas = started(upstream, turn)
        return event_stream(_stream(turn, upstream, deltas, reply_id, body.model))


@router.post("/messages/count_tokens", response_model=None)
def count_tokens(
    loci: Engine, body: MessagesRequest,
    x_loci_session: Annotated[str | None, Header()] = None,
) -> dict[str, int]:
    """The input tokens the call would send: the client's system text and Loci's
    compiled context around the new message (nothing is recorded)."""
    chat = body.as_chat()
    last = chat.messages[-1]
    message = message_text(last["content"]) if last.get("role") == "user" else None
    context = loci.compile(body.session(x_loci_session), message, model=body.model,
                           guest=True)
    system = sum(loci.counter.count(message_text(m["content"])) for m in chat.messages
                 if m.get("role") == "system")
    return {"input_tokens": context.total_tokens + system}


def _chat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The tool as a chat function tool that keeps the client's definition under
    ``ANTHROPIC_TOOL``: an Anthropic upstream gets it as it came (Anthropic's own tool
    types, such as the memory tool, and ``cache_control`` included)."""
    if not isinstance(tool.get("name"), str):
        raise ValidationError("each tool needs a name and an input_schema")
    function: dict[str, Any] = {"name": tool["name"],
                                "parameters": tool.get("input_schema") or {"type": "object"}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function, ANTHROPIC_TOOL: dict(tool)}


def _chat_tool_choice(choice: Mapping[str, Any] | None) -> dict[str, Any]:
    if not choice:
        return {}
    kinds = {"auto": "auto", "any": "required", "none": "none"}
    kind = choice.get("type")
    params: dict[str, Any] = {}
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


def _tool_blocks(calls: list[Any] | None) -> list[dict[str, Any]]:
    blocks = []
    for call in calls or ():
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"arguments": function.get("arguments")}
        blocks.append({"type": "tool_use", "id": call.get("id") or "",
                       "name": function.get("name") or "", "input": arguments})
    return blocks


def _usage(usage: Usage) -> dict[str, int]:
    """Anthropic's ``usage``: its ``input_tokens`` are those neither read from the cache
    nor written to it."""
    return {"input_tokens": usage.uncached_tokens,
            "cache_read_input_tokens": usage.cached_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens}


def _message(reply_id: str, model: str, clean: str, answer: Completion,
             usage: Usage) -> dict[str, Any]:
    content = ([{"type": "text", "text": clean}] if clean or not answer.tool_calls else [])
    return {"id": reply_id, "type": "message", "role": "assistant", "model": model,
            "content": (answer.blocks or []) + content + _tool_blocks(answer.tool_calls),
            "stop_reason": _STOP.get(answer.finish_reason, "end_turn"),
            "stop_sequence": None, "usage": _usage(usage)}


def _event(kind: str, data: dict[str, Any]) -> bytes:
    payload = json.dumps({"type": kind, **data}, ensure_ascii=False)
    return f"event: {kind}\ndata: {payload}\n\n".encode()


def _stream(turn: ProxyTurn, upstream: Upstream, deltas: Iterator[Delta], reply_id: str,
            model: str) -> Iterator[bytes]:
    """The Messages event sequence: thinking blocks as they end, the text block as it
    arrives (tags held back), then each tool call as a whole ``tool_use`` block, the
    stop reason and usage."""
    try:
        yield _event("message_start", {"message": {
            "id": reply_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}}})
        relay = Relay(turn, upstream)
        blocks = _Blocks()
        for delta in relay.rounds(deltas):
            for block in delta.blocks or ():
                yield from blocks.whole(block)
            if text := relay.feed(delta):
                yield from blocks.text(text)
        yield from blocks.text(relay.end(), last=True)
        for block in _tool_blocks(relay.calls):
            yield from blocks.whole({**block, "input": {}}, json.dumps(block["input"]))
        yield _event("message_delta", {
            "delta": {"stop_reason": _STOP.get(relay.finish, "end_turn"),
                      "stop_sequence": None},
            "usage": _usage(turn.spent)})
        yield _event("message_stop", {})
    except LociError as exc:
        yield _event("error", {"error": {"type": "api_error", "message": str(exc)}})
    finally:
        upstream.close()


class _Blocks:
    """The content blocks of a streamed message, numbered as they are opened: whole
    blocks (thinking, tool use) at once, the text block kept open while text arrives."""

    def __init__(self) -> None:
        self.index = 0
        self.open_text = False
        self.texts = 0

    def whole(self, block: dict[str, Any], arguments: str | None = None) -> Iterator[bytes]:
        """A whole block: a thinking block with its text and signature as deltas, a
        compaction block with its content as one delta, or a tool-use block with its
        input as one JSON delta."""
        yield from self._close_text()
        start = dict(block)
        deltas = []
        if block.get("type") == "thinking":
            start.update(thinking="", signature="")
            deltas = [{"type": "thinking_delta", "thinking": block.get("thinking") or ""},
                      {"type": "signature_delta", "signature": block.get("signature") or ""}]
        elif block.get("type") == "compaction":
            start.update(content=None, encrypted_content=None)
            deltas = [{"type": "compaction_delta", "content": block.get("content"),
                       "encrypted_content": block.get("encrypted_content")}]
        elif arguments is not None:
            deltas = [{"type": "input_json_delta", "partial_json": arguments}]
        yield _event("content_block_start", {"index": self.index, "content_block": start})
        for delta in deltas:
            yield _event("content_block_delta", {"index": self.index, "delta": delta})
        yield _event("content_block_stop", {"index": self.index})
        self.index += 1

    def text(self, text: str, *, last: bool = False) -> Iterator[bytes]:
        """Text for the text block (opened first if need be); ``last`` closes it, and
        a message without any text still gets its (empty) text block."""
        if (text or (last and not self.texts)) and not self.open_text:
            yield _event("content_block_start", {
                "index": self.index, "content_block": {"type": "text", "text": ""}})
            self.open_text, self.texts = True, self.texts + 1
        if text:
            yield _event("content_block_delta", {
                "index": self.index, "delta": {"type": "text_delta", "text": text}})
        if last:
            yield from self._close_text()

    def _close_text(self) -> Iterator[bytes]:
        if self.open_text:
            yield _event("content_block_stop", {"index": self.index})
            self.open_text = False
            self.index += 1
