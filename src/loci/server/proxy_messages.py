"""The Anthropic Messages face of the proxy: ``POST /v1/messages`` (streaming and not)
and ``POST /v1/messages/count_tokens``, for clients of the Messages API (the
``anthropic`` SDK, ``ANTHROPIC_BASE_URL``).

A Messages request is read into the turn (``apis.anthropic``: system text, messages
with ``tool_use`` / ``tool_result`` blocks as tool calls and tool messages, its tools
kept as they came) and goes through the same :class:`~loci.Exchange`:
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
(``apis.media``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, cast

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse
from pydantic import Field, StrictBool, TypeAdapter, field_validator

from loci import Asked, Exchange, LociError, Relay, Usage, ValidationError
from loci.apis import anthropic
from loci.apis.anthropic_stream import Blocks, event
from loci.apis.shapes import AnthropicMessage
from loci.apis.turn import Completion, Delta
from loci.apis.wire import JSONObject
from loci.server.hub import header_text
from loci.server.proxy import Engine
from loci.server.proxy_requests import (
    ANTHROPIC_MESSAGES,
    ANTHROPIC_TOOLS,
    AnthropicMetadata,
    AnthropicTextBlock,
    AnthropicToolChoice,
    FaceRequest,
    checked,
)
from loci.server.proxy_turn import chat_params, serve

router = APIRouter(tags=["proxy"])
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
    messages: list[JSONObject] = Field(min_length=1)
    system: str | list[JSONObject] | None = None
    stream: StrictBool = False
    metadata: AnthropicMetadata | None = None
    #: The session, for a client that cannot send the ``X-Loci-Session`` header.
    loci_session: str | None = Field(None, min_length=1)
    tools: list[JSONObject] | None = None
    tool_choice: AnthropicToolChoice | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)

    @field_validator("messages")
    @classmethod
    def _messages(cls, value: list[JSONObject]) -> list[JSONObject]:
        return cast("list[JSONObject]", checked(ANTHROPIC_MESSAGES, value, "messages"))

    @field_validator("system")
    @classmethod
    def _system(cls, value: Any) -> Any:
        return value if not isinstance(value, list) else checked(_SYSTEM, value, "system")

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[JSONObject] | None) -> list[JSONObject] | None:
        return None if value is None else cast("list[JSONObject]",
                                               checked(ANTHROPIC_TOOLS, value, "tools"))

    def session(self, header: str | None) -> str:
        session = header or self.loci_session
        if not session:
            raise ValidationError(
                "name the session: send the header 'X-Loci-Session: <name>' (Claude Code: "
                "ANTHROPIC_CUSTOM_HEADERS='X-Loci-Session: <name>') or the field "
                "loci_session")
        return session

    def asked(self, *, to_anthropic: bool = False, beta: str | None = None) -> Asked:
        """The turn this request asks for (with the client's ``metadata`` when it goes
        ``to_anthropic``)."""
        messages = [anthropic.system_message(self.system)] if self.system else []
        for message in self.messages:
            messages += anthropic.read_message(message)
        given = self.model_dump(exclude_unset=True, exclude=set(_OWN))
        params: JSONObject = {k: v for k, v in given.items() if v is not None}
        if self.max_tokens:
            params["max_tokens"] = self.max_tokens
        if self.stop_sequences:
            params["stop"] = self.stop_sequences
        if self.metadata is not None and to_anthropic:
            # Anthropic's own field; OpenAI refuses a metadata without store.
            params["metadata"] = self.metadata.model_dump(exclude_none=True)
        if self.tools:
            choice = self.tool_choice.model_dump(exclude_none=True) if self.tool_choice \
                else None
            params.update(anthropic.chat_tool_choice(choice))
        return Asked(self.model, messages, chat_params(params),
                     anthropic.tools(self.tools or ()), beta)


@router.post("/messages", response_model=None)
def messages(
    loci: Engine, body: MessagesRequest,
    x_loci_session: Annotated[str | None, Header()] = None,
    anthropic_beta: Annotated[str | None, Header()] = None,
) -> Mapping[str, object] | StreamingResponse:
    """Anthropic's Messages API, with Loci's context in and memory out."""
    if body.max_tokens is None:
        raise ValidationError("max_tokens is required")
    session = body.session(header_text(x_loci_session))
    asked = body.asked(to_anthropic=loci.settings.upstream_provider == "anthropic",
                       beta=anthropic_beta)
    return serve(loci, session, asked, MessagesFace(body.model), stream=body.stream)


@router.post("/messages/count_tokens", response_model=None)
def count_tokens(
    loci: Engine, body: MessagesRequest,
    x_loci_session: Annotated[str | None, Header()] = None,
) -> dict[str, int]:
    """The input tokens the call would send: the client's system text and Loci's
    compiled context around the new message (nothing is recorded)."""
    messages = body.asked().messages
    last = messages[-1]
    message = last.text if last.role == "user" else None
    context = loci.compile(body.session(header_text(x_loci_session)), message, model=body.model,
                           guest=True)
    system = sum(loci.counter.count(m.text) for m in messages if m.role == "system")
    return {"input_tokens": context.total_tokens + system}


class MessagesFace:
    """Messages answers: a ``message``, or its event sequence."""

    name = "messages"

    def __init__(self, model: str) -> None:
        self.id, self.model = f"msg_loci_{secrets.token_hex(12)}", model

    def answer(self, clean: str, answer: Completion, spent: Usage) -> AnthropicMessage:
        return anthropic.message(self.id, self.model, clean, answer, spent)

    def events(self, turn: Exchange, relay: Relay, deltas: Iterator[Delta]
               ) -> Iterator[bytes]:
        """Thinking blocks as they end, the text block as it arrives (tags held back),
        then each tool call as a whole ``tool_use`` block, the stop reason and usage."""
        yield event("message_start", {"message": {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}}})
        blocks = Blocks()
        for delta in relay.rounds(deltas):
            for block in delta.blocks or ():
                yield from blocks.whole(block)
            if text := relay.feed(delta):
                yield from blocks.text(text)
        yield from blocks.text(relay.end(), last=True)
        for block in anthropic.tool_blocks(relay.calls):
            yield from blocks.whole({**block, "input": {}}, json.dumps(block["input"]))
        yield event("message_delta", {
            "delta": {"stop_reason": anthropic.STOPS.get(relay.finish, "end_turn"),
                      "stop_sequence": None},
            "usage": anthropic.usage(turn.spent)})
        yield event("message_stop", {})

    def error(self, exc: LociError) -> bytes:
        return event("error", {"error": {"type": "api_error", "message": str(exc)}})
