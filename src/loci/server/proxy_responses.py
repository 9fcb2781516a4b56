"""The OpenAI Responses face of the proxy: ``POST /v1/responses`` (streaming and not),
for clients of the Responses API (the ``openai`` SDK's ``responses.create``, agents
built on it).

A Responses request is read into the turn (``apis.responses``: ``instructions`` and the
input items: messages, ``function_call`` and ``function_call_output``; its function
tools) and goes through the same :class:`~loci.Exchange`. The answer is a
``response`` object whose output holds a ``message`` item and one ``function_call`` item
per tool call; streamed as the published events (``response.created``, output items and
content parts with their deltas, ``response.completed``). The session is the ``X-Loci-Session``
header, else the ``user`` field. Loci's event log is the conversation, so
``previous_response_id`` needs nothing more: the session already holds what came
before. Images and files go to the upstream (``apis.media``); ``reasoning`` items (a
Chat Completions upstream has no use for them) and ``compaction`` items (see
``proxy_compact``) are accepted and not sent on.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Annotated, Any, cast

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse
from pydantic import Field, StrictBool, field_validator, model_validator

from loci import Asked, Exchange, Loci, LociError, NotFoundError, Relay, Usage, ValidationError
from loci.apis import chat
from loci.apis import responses as api
from loci.apis.responses import Shell
from loci.apis.shapes import Response, ResponsesCall, ResponsesMessage
from loci.apis.turn import Completion, Delta, Message, ToolCall
from loci.apis.wire import JSONObject
from loci.server.hub import header_text
from loci.server.proxy import Engine
from loci.server.proxy_requests import RESPONSES_ITEMS, RESPONSES_TOOLS, FaceRequest, checked
from loci.server.proxy_turn import chat_params, serve

router = APIRouter(tags=["proxy"])
#: How far back the log is searched for the calls a client's outputs answer.
RECENT_CALLS = 200
#: Request fields read here, not passed on as parameters.
_OWN = frozenset({"model", "input", "instructions", "stream", "user", "tools",
                  "tool_choice", "max_output_tokens", "previous_response_id", "store",
                  "metadata", "parallel_tool_calls", "text", "include", "truncation"})


class ResponsesRequest(FaceRequest):
    """An OpenAI Responses request (``proxy_requests``); sampling fields Loci does not
    use pass through."""

    model: str = Field(min_length=1)
    input: str | list[JSONObject]
    instructions: str | None = None
    stream: StrictBool = False
    user: str | None = None
    tools: list[JSONObject] | None = None
    tool_choice: str | JSONObject | None = None
    parallel_tool_calls: StrictBool | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _no_messages(cls, data: Any) -> Any:
        if isinstance(data, dict) and "messages" in data:
            raise ValueError("messages: the Responses API takes its messages as 'input'")
        return data

    @field_validator("input")
    @classmethod
    def _input(cls, value: str | list[JSONObject]) -> str | list[JSONObject]:
        return value if isinstance(value, str) else cast(
            "list[JSONObject]", checked(RESPONSES_ITEMS, value, "input"))

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[JSONObject] | None) -> list[JSONObject] | None:
        return None if value is None else cast("list[JSONObject]",
                                               checked(RESPONSES_TOOLS, value, "tools"))

    def asked(self) -> Asked:
        """The turn this request asks for."""
        messages: list[Message] = []
        if self.instructions:
            messages.append(Message("system", chat.system_texts(self.instructions)))
        items = ([{"role": "user", "content": self.input}] if isinstance(self.input, str)
                 else self.input)
        for item in items:
            api.read_item(messages, item)
        if all(message.role == "system" for message in messages):
            raise ValidationError("input holds no message")  # instructions alone
        given = self.model_dump(exclude_unset=True, exclude=set(_OWN))
        params: JSONObject = {k: v for k, v in given.items() if v is not None}
        if self.max_output_tokens:
            params["max_tokens"] = self.max_output_tokens
        if self.tools:
            if self.tool_choice is not None:
                params["tool_choice"] = api.chat_tool_choice(self.tool_choice)
            if self.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = self.parallel_tool_calls
        return Asked(self.model, messages, chat_params(params), api.tools(self.tools or ()))


@router.post("/responses", response_model=None)
def responses(
    loci: Engine, body: ResponsesRequest,
    x_loci_session: Annotated[str | None, Header()] = None,
) -> Mapping[str, object] | StreamingResponse:
    """OpenAI's Responses API, with Loci's context in and memory out."""
    session = header_text(x_loci_session) or body.user
    if not session:
        raise ValidationError("name the session: send the header 'X-Loci-Session: "
                              "<name>' or the request's 'user' field")
    asked = _with_recorded_calls(loci, session, body.asked())
    return serve(loci, session, asked, ResponsesFace(Shell(body.model)), stream=body.stream)


def _with_recorded_calls(loci: Loci, session: str, asked: Asked) -> Asked:
    """With ``previous_response_id`` a client sends only the outputs of the calls the
    last response asked for: those calls are in the session's log, and go before them."""
    messages = asked.messages
    first = next((i for i, m in enumerate(messages) if m.role != "system"), 0)
    if messages[first].role != "tool":
        return asked
    wanted = {m.result.call_id for m in messages[first:] if m.result is not None}
    try:
        recent = loci.events(session, include_archived=False)[-RECENT_CALLS:]
    except NotFoundError:
        recent = []
    calls = tuple(ToolCall(e.tool_call_id or "", e.tool_name or "", json.dumps(e.args or {}))
                  for e in recent if e.type == "tool_call" and e.tool_call_id in wanted)
    if not calls:
        return asked
    return replace(asked, messages=[*messages[:first], Message("assistant", calls),
                                    *messages[first:]])


class ResponsesFace:
    """Responses answers: a ``response`` object, or its event sequence."""

    name = "responses"

    def __init__(self, shell: Shell) -> None:
        self.shell, self.numbers = shell, itertools.count()

    def answer(self, clean: str, answer: Completion, spent: Usage) -> Response:
        return self.shell.done(clean, answer.tool_calls, spent)

    def event(self, kind: str, **data: Any) -> bytes:
        payload = json.dumps({"type": kind, "sequence_number": next(self.numbers), **data},
                             ensure_ascii=False)
        return f"event: {kind}\ndata: {payload}\n\n".encode()

    def events(self, turn: Exchange, relay: Relay, deltas: Iterator[Delta]
               ) -> Iterator[bytes]:
        """The message item's text as it arrives (tags held back), then each function
        call as a whole item, then ``response.completed``."""
        shell, event = self.shell, self.event
        where = {"item_id": shell.message_id, "output_index": 0, "content_index": 0}
        yield event("response.created", response=shell.response("in_progress", []))
        yield event("response.output_item.added", output_index=0,
                    item={**shell.message("", "in_progress"), "content": []})
        yield event("response.content_part.added", part={
            "type": "output_text", "text": "", "annotations": []}, **where)
        for delta in relay.rounds(deltas):
            if text := relay.feed(delta):
                yield event("response.output_text.delta", delta=text, **where)
        if rest := relay.end():
            yield event("response.output_text.delta", delta=rest, **where)
        clean, calls, usage = relay.clean, relay.calls, turn.spent
        part = {"type": "output_text", "text": clean, "annotations": []}
        yield event("response.output_text.done", text=clean, **where)
        yield event("response.content_part.done", part=part, **where)
        yield event("response.output_item.done", output_index=0, item=shell.message(clean))
        for index, item in enumerate(shell.calls(calls), start=1):
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "arguments": ""})
            yield event("response.function_call_arguments.done", item_id=item["id"],
                        output_index=index, arguments=item["arguments"])
            yield event("response.output_item.done", output_index=index, item=item)
        output: list[ResponsesMessage | ResponsesCall] = [shell.message(clean),
                                                          *shell.calls(calls)]
        yield event("response.completed", response=shell.response("completed", output, usage))

    def error(self, exc: LociError) -> bytes:
        return self.event("error", code=type(exc).__name__, message=str(exc), param=None)
