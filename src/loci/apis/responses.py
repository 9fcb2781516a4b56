"""OpenAI's Responses API: requests, answers and streams.

- A client's input items (``read_item``): messages, ``function_call`` items joining the
  assistant message before them, ``function_call_output`` items as ``tool`` messages,
  ``input_image``/``input_file`` parts as attachments; ``reasoning`` and ``compaction``
  items are accepted and not sent on. Its tools (``tools``): function tools only.
- A request to a Responses upstream (``request_body``): the client's system text as
  ``developer`` messages, then Loci's context as input items
  (``CompiledContext.to_responses``), stateless (``store: false``) with the reasoning's
  ``encrypted_content`` asked for; ``max_tokens`` → ``max_output_tokens``, function tools
  and ``tool_choice`` flattened.
- An answer (``answer``) or a stream's events (``deltas``): the ``message`` text, the
  ``function_call`` items as tool calls, the ``reasoning`` items whole
  (``Completion.blocks``): kept with the turn, they go back in front of it on every later
  request, as a reasoning model needs them in a tool loop.
- The client's ``response`` object and its output items (``Shell``).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from loci.apis import chat
from loci.apis.media import responses_parts
from loci.apis.shapes import ChatToolCall, Response, ResponsesCall, ResponsesMessage
from loci.apis.turn import (
    REASONING_ITEMS,
    Completion,
    Delta,
    Media,
    Message,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolResult,
)
from loci.apis.wire import JSONObject, mapping, read_usage
from loci.errors import ValidationError
from loci.models import Usage

if TYPE_CHECKING:  # the context renders itself with the API modules
    from loci.context.compiled import CompiledContext

#: Chat parameters a Responses request takes as they are.
_PASSED = ("temperature", "top_p", "parallel_tool_calls", "reasoning", "service_tier",
           "metadata", "prompt_cache_key", "safety_identifier")


# -- the client's request ----------------------------------------------------------------

def read_item(messages: list[Message], item: Mapping[str, Any]) -> None:
    """One input item as the turn's messages: function calls join the assistant message
    before them, their outputs become ``tool`` messages."""
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise ValidationError(f"unknown message role {role!r}")
        parts = item_content(item.get("content"))
        if role in ("system", "developer"):
            messages.append(Message("system", chat.system_texts(
                "".join(p.text for p in parts if isinstance(p, Text)))))
        else:
            messages.append(Message("user" if role == "user" else "assistant", parts))
    elif kind == "function_call":
        called = ToolCall(str(item.get("call_id") or ""), str(item.get("name") or ""),
                          str(item.get("arguments") or "{}"))
        if messages and messages[-1].role == "assistant":
            messages[-1] = Message("assistant", (*messages[-1].parts, called))
        else:
            messages.append(Message("assistant", (called,)))
    elif kind in ("reasoning", "compaction"):
        # A reasoning model's own items (a chat-completions upstream has no use for
        # them); a compaction item of ``/responses/compact``: Loci's log holds what it
        # stands for.
        pass
    elif kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
        messages.append(Message("tool", (ToolResult(str(item.get("call_id") or ""),
                                                    (Text(text),) if text else ()),)))
    else:
        raise ValidationError(f"input items of type {kind!r} are not supported by Loci "
                              "yet: send messages, function_call and function_call_output "
                              "items")


def item_content(content: Any) -> tuple[Text | Media, ...]:
    """A message's content: its text, and its images and files as attachments after it
    (chat content parts, ``apis.media``)."""
    if isinstance(content, str):
        return (Text(content),) if content else ()
    if not isinstance(content, list):
        raise ValidationError("a message's content must be text or a list of parts")
    texts, media = [], []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("input_text", "output_text", "text"):
            texts.append(str(part.get("text") or ""))
        elif kind in ("input_image", "input_file"):
            media.append(Media(media_part(part)))
        else:
            raise ValidationError(f"content parts of type {kind!r} are not supported by "
                                  "Loci: send text, images and files")
    text = "\n".join(texts)
    return ((Text(text),) if text else ()) + tuple(media)


def media_part(part: Mapping[str, Any]) -> JSONObject:
    """An ``input_image`` or ``input_file`` part as a chat content part."""
    if part.get("type") == "input_image":
        if not isinstance(part.get("image_url"), str):
            raise ValidationError("send an input_image with its image_url (a URL or a data: "
                                  "URL); file ids are not supported")
        image: JSONObject = {"url": part["image_url"]}
        if part.get("detail"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    file: JSONObject = {k: part[k] for k in ("file_data", "file_id", "filename") if part.get(k)}
    if not file.get("file_data") and not file.get("file_id"):
        raise ValidationError("send an input_file with its file_data (a data: URL)")
    return {"type": "file", "file": file}


def tools(declared: Sequence[Mapping[str, Any]]) -> tuple[Tool, ...]:
    """A Responses request's ``tools``: function tools."""
    out = []
    for tool in declared:
        if tool.get("type") != "function" or not isinstance(tool.get("name"), str):
            raise ValidationError("only function tools ({\"type\": \"function\", \"name\": "
                                  "..., \"parameters\": {...}}) are supported")
        out.append(Tool("responses", tool, tool["name"], tool.get("description"),
                        tool.get("parameters"), tool.get("strict")))
    return tuple(out)


def chat_tool_choice(choice: str | Mapping[str, Any]) -> Any:
    """A Responses ``tool_choice`` as the chat one it means."""
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise ValidationError("tool_choice must be \"auto\", \"required\", \"none\" or "
                          "{\"type\": \"function\", \"name\": ...}")


# -- the request to a Responses upstream -------------------------------------------------

def to_input(messages: Sequence[Message]) -> list[JSONObject]:
    """Loci's messages as Responses input items: messages, ``function_call`` and
    ``function_call_output`` items, an assistant turn's kept ``reasoning`` items first."""
    items: list[JSONObject] = []
    for message in messages:
        role = message.role
        items += [dict(b.original) for b in message.blocks
                  if b.original.get("type") in REASONING_ITEMS] if role == "assistant" else []
        if message.result is not None:
            items.append({"type": "function_call_output", "call_id": message.result.call_id,
                          "output": message.text})
            continue
        if message.text:
            items.append({"role": "developer" if role == "system" else role,
                          "content": message.text})
        items += [{"type": "function_call", "call_id": c.id, "name": c.name,
                   "arguments": c.arguments or "{}"} for c in message.calls]
    return items


def context_input(context: CompiledContext, system: Sequence[Mapping[str, Any]],
                  attachments: Sequence[Mapping[str, Any]] = ()) -> list[JSONObject]:
    """Responses ``input`` items for a compiled ``context`` (the client's system text
    as ``developer`` messages first, the attachments after the new message's text)."""
    items = [{"role": "developer", "content": block["text"]} for block in system]
    items += context.to_responses()
    if attachments:
        last = items[-1]
        items[-1] = {**last, "content": [{"type": "input_text", "text": last["content"]},
                                         *responses_parts(attachments)]}
    return items


def request_body(request: Request, *, stream: bool) -> JSONObject:
    """The Responses request for ``request``."""
    params = request.params
    items = context_input(request.context, request.system, request.attachments)
    body: JSONObject = {"model": request.model, "input": items, "store": False,
                            "include": ["reasoning.encrypted_content"]}
    tokens = params.get("max_tokens") or params.get("max_completion_tokens")
    if tokens:
        body["max_output_tokens"] = tokens
    for name in _PASSED:
        if params.get(name) is not None:
            body[name] = params[name]
    if params.get("reasoning_effort") and "reasoning" not in body:
        body["reasoning"] = {"effort": params["reasoning_effort"]}
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
    if params.get("tool_choice") is not None:
        body["tool_choice"] = _tool_choice(params["tool_choice"])
    if stream:
        body["stream"] = True
    return body


def _tool(tool: Tool) -> Mapping[str, Any]:
    """``tool`` as a Responses function tool (a Responses client's as it came)."""
    if tool.api == "responses":
        return tool.original
    if tool.name is None:
        raise ValidationError("a Responses upstream takes function tools only")
    fields = {"name": tool.name, "description": tool.description,
              "parameters": tool.parameters, "strict": tool.strict}
    return {"type": "function", **{k: v for k, v in fields.items() if v is not None}}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    name = mapping(mapping(choice).get("function")).get("name")
    if not isinstance(name, str):
        raise ValidationError("tool_choice must be \"auto\", \"required\", \"none\" or "
                              "{\"type\": \"function\", \"function\": {\"name\": ...}}")
    return {"type": "function", "name": name}


# -- answers and streams -----------------------------------------------------------------

def answer(payload: Mapping[str, Any]) -> Completion:
    """A ``response`` object: its ``message`` text, ``function_call`` items as tool
    calls, ``reasoning`` items kept whole."""
    output = [mapping(item) for item in payload.get("output") or ()]
    text = "".join(str(part.get("text") or "") for item in output
                   if item.get("type") == "message"
                   for part in map(mapping, item.get("content") or ())
                   if part.get("type") == "output_text")
    found = [call(item) for item in output if item.get("type") == "function_call"]
    cut = mapping(payload.get("incomplete_details")).get("reason") == "max_output_tokens"
    return Completion(
        content=text, usage=read_usage(payload.get("usage")), tool_calls=found or None,
        finish_reason="tool_calls" if found else "length" if cut else "stop",
        id=payload.get("id") if isinstance(payload.get("id"), str) else None,
        blocks=[dict(item) for item in output if item.get("type") == "reasoning"] or None)


def call(item: Mapping[str, Any]) -> ChatToolCall:
    """A ``function_call`` item as a tool call."""
    return {"id": str(item.get("call_id") or ""), "type": "function",
            "function": {"name": str(item.get("name") or ""),
                         "arguments": str(item.get("arguments") or "{}")}}


def text_delta(event: Any) -> str | None:
    """The text a streamed ``response.output_text.delta`` event adds, else None."""
    if type(event) is not dict or event.get("type") != "response.output_text.delta":
        return None
    text = event.get("delta")
    return text if type(text) is str else None


def deltas(events: Iterable[Mapping[str, Any]], calls: int = 0) -> Iterator[Delta]:
    """What a read's streamed events add to the answer; ``calls`` function calls came
    before them (``Delta.tool_calls`` carry their index)."""
    for data in events:
        kind = data.get("type")
        if kind == "response.output_text.delta":
            yield Delta(content=text_delta(data) or "")
        elif kind == "response.output_item.done":
            item = mapping(data.get("item"))
            if item.get("type") == "reasoning":
                yield Delta(blocks=[dict(item)])
            elif item.get("type") == "function_call":
                # A piece of JSON like any streamed call's (``Delta.tool_calls``).
                piece = cast("JSONObject", {**call(item), "index": calls})
                yield Delta(tool_calls=[piece])
                calls += 1
        elif kind in ("response.completed", "response.incomplete"):
            done = answer(mapping(data.get("response")))
            yield Delta(finish_reason="tool_calls" if calls else done.finish_reason,
                        usage=done.usage)


# -- the client's answer -----------------------------------------------------------------

class Shell:
    """The ``response`` object around one answer, and its output items."""

    def __init__(self, model: str) -> None:
        self.id = f"resp_loci_{secrets.token_hex(12)}"
        self.message_id = f"msg_loci_{secrets.token_hex(12)}"
        self.model, self.created = model, int(time.time())

    def response(self, status: str, output: list[ResponsesMessage | ResponsesCall],
                 spent: Usage | None = None) -> Response:
        spent = spent or Usage()
        return {
            "id": self.id, "object": "response", "created_at": self.created,
            "status": status, "model": self.model, "output": output, "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {},
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "temperature": None, "top_p": None,
            "usage": {"input_tokens": spent.input_tokens,
                      "output_tokens": spent.output_tokens,
                      "total_tokens": spent.input_tokens + spent.output_tokens,
                      "input_tokens_details": {"cached_tokens": spent.cached_tokens},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        }

    def message(self, text: str, status: str = "completed") -> ResponsesMessage:
        return {"type": "message", "id": self.message_id, "status": status,
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}

    def calls(self, tool_calls: Sequence[Mapping[str, Any]] | None) -> list[ResponsesCall]:
        return [{"type": "function_call", "id": f"fc_{c.get('id') or n}",
                 "call_id": c.get("id") or "", "name": c["function"]["name"],
                 "arguments": c["function"].get("arguments") or "{}",
                 "status": "completed"} for n, c in enumerate(tool_calls or ())]

    def done(self, clean: str, tool_calls: Sequence[Mapping[str, Any]] | None,
             spent: Usage) -> Response:
        output = [self.message(clean)] if clean or not tool_calls else []
        return self.response("completed", output + self.calls(tool_calls), spent)
