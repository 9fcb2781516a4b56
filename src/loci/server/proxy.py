"""An OpenAI-compatible memory proxy: ``POST /v1/chat/completions`` (streaming and not)
and ``GET /v1/models``. Point any OpenAI client at Loci and every call gets Loci's
context, and every answer is remembered.

One call, for the caller's tenant and agent (the REST authentication rules):

1. The session is the ``X-Loci-Session`` header, else the request's ``user`` field
   (422 if neither).
2. The client's **last message is the new one**: the user's, or the results of the
   tool calls of the previous answer (see ``loci.turns``). Loci's log is
   the history: clients that resend the whole conversation are not recorded twice.
   The rule: if the session has no events yet, the client's earlier user and
   assistant messages are imported into it first (so a conversation started
   elsewhere keeps its history); otherwise they are ignored, because Loci already
   holds them (compacted, summarized and searchable). The client's ``system``
   messages are its own instructions: they are sent first, ahead of Loci's context,
   on every call, and never stored.
3. Loci compiles the context around the new message (``Loci.compile``, which also
   compacts first when the session is over its thresholds) and sends it to the
   upstream with the client's model and parameters (temperature, max_tokens, tools,
   ... pass through; see ``proxy_upstream``).
4. Only when the upstream has answered are the user's message and the reply appended
   to the session (``Loci.add`` and ``Loci.add_reply``, which saves and strips
   ``[MEMORY:type]``/``[STATE:key]`` tags and runs compaction), so a failed call leaves
   no trace and the client may simply retry (tool results are the exception: they
   are appended first, once per ``tool_call_id``). A stream the client abandons midway is
   not recorded either.
5. The client gets the clean answer in OpenAI's shape. Streams are filtered by
   :class:`~loci.memory.stream.TagFilter`, so tags never reach the client.

A request is checked at the edge (``proxy_requests``: 422 naming the field, before the
session is touched). An upstream failure is HTTP 502 with the upstream's message
(mid-stream: an error event, as OpenAI sends), and so is an answer no API gives (a tool
call without an id or a function name, text with a lone surrogate, a stream cut short:
``apis.sound.sound_completion``): checked before its usage or anything of the turn is
recorded. No upstream configured is 503; ``[proxy] timeout`` bounds each upstream call,
a streamed one in all.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Annotated, cast

from fastapi import APIRouter, Depends, Header
from fastapi import Request as HttpRequest
from fastapi.responses import StreamingResponse
from pydantic import Field, field_validator

from loci import Asked, Exchange, Loci, LociError, Relay, Usage, ValidationError
from loci.apis import chat
from loci.apis.chat import chunk
from loci.apis.shapes import ChatBase, ChatCompletion, ChatUsageChunk
from loci.apis.turn import Completion, Delta
from loci.apis.wire import JSONObject, mapping
from loci.server.deps import hub_of, principal_of
from loci.server.hub import header_text
from loci.server.proxy_requests import CHAT_MESSAGES, CHAT_TOOLS, ChatParams, checked
from loci.server.proxy_stream import sse
from loci.server.proxy_turn import serve
from loci.server.proxy_upstream import OWN_FIELDS

router = APIRouter(tags=["proxy"])


async def get_proxy_engine(request: HttpRequest) -> AsyncIterator[Loci]:
    """The caller's engine, as for REST, except that in open mode the bearer token is
    ignored: OpenAI clients always send one, whatever text their ``api_key`` holds."""
    with hub_of(request).serving(principal_of(request, bearer_optional=True)) as engine:
        yield engine


Engine = Annotated[Loci, Depends(get_proxy_engine)]


class ChatRequest(ChatParams):
    """An OpenAI chat-completions request (``proxy_requests``); fields Loci does not use
    pass through."""

    model: str = Field(min_length=1)
    messages: list[JSONObject] = Field(min_length=1)
    user: str | None = None
    tools: list[JSONObject] | None = None

    @field_validator("messages")
    @classmethod
    def _messages(cls, value: list[JSONObject]) -> list[JSONObject]:
        return cast("list[JSONObject]", checked(CHAT_MESSAGES, value, "messages"))

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[JSONObject] | None) -> list[JSONObject] | None:
        return None if value is None else cast("list[JSONObject]",
                                               checked(CHAT_TOOLS, value, "tools"))

    def params(self) -> JSONObject:
        given = self.model_dump(exclude_unset=True, exclude=set(OWN_FIELDS))
        return {k: v for k, v in given.items() if v is not None}

    def asked(self) -> Asked:
        return Asked(self.model, chat.read_messages(self.messages), self.params(),
                     chat.tools(self.tools or ()))


@router.get("/models")
def list_models(loci: Engine) -> JSONObject:
    """The models this proxy offers (``[proxy] models``, default: the configured one)."""
    names = loci.settings.proxy.models or [loci.settings.model]
    return {"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "loci"} for name in names]}


@router.post("/chat/completions", response_model=None)
def chat_completions(
    loci: Engine, body: ChatRequest,
    x_loci_session: Annotated[str | None, Header()] = None,
) -> Mapping[str, object] | StreamingResponse:
    """OpenAI's chat completions, with Loci's context in and memory out."""
    session = header_text(x_loci_session) or body.user
    if not session:
        raise ValidationError("name the session: send the header 'X-Loci-Session: <name>' "
                              "or the request's 'user' field")
    if body.params().get("n", 1) != 1:
        raise ValidationError("the proxy returns one choice: leave n at 1")
    return serve(loci, session, body.asked(), ChatFace(body.model), stream=body.stream)


class ChatFace:
    """Chat Completions answers: a ``chat.completion``, or its chunks."""

    name = "chat"

    def __init__(self, model: str) -> None:
        self.base: ChatBase = {"id": f"chatcmpl-loci-{secrets.token_hex(12)}",
                     "created": int(time.time()), "model": model}

    def answer(self, clean: str, answer: Completion, spent: Usage) -> ChatCompletion:
        return chat.completion(self.base, clean, answer, spent)

    def events(self, turn: Exchange, relay: Relay, deltas: Iterator[Delta]
               ) -> Iterator[bytes]:
        """SSE chunks as the upstream's text arrives, tags held back (see
        ``memory.stream``), then the finish reason, the usage if asked for, [DONE]."""
        yield sse(chunk(self.base, {"role": "assistant", "content": ""}))
        for delta in relay.rounds(deltas):
            if text := relay.feed(delta):
                yield sse(chunk(self.base, {"content": text}))
            if delta.tool_calls:
                yield sse(chunk(self.base, {"tool_calls": delta.tool_calls}))
        if rest := relay.end():
            yield sse(chunk(self.base, {"content": rest}))
        yield sse(chunk(self.base, {}, relay.finish))
        if mapping(turn.asked.params.get("stream_options")).get("include_usage"):
            last: ChatUsageChunk = {**self.base, "object": "chat.completion.chunk",
                               "choices": [], "usage": chat.usage(turn.spent)}
            yield sse(last)
        yield sse("[DONE]")

    def error(self, exc: LociError) -> bytes:
        return sse({"error": {"type": type(exc).__name__, "message": str(exc)}})
