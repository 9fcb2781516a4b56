"""OpenAI's Chat Completions API: requests, answers and streams.

- A request to a Chat Completions upstream (``request_body``): the client's system text,
  then Loci's context (``CompiledContext.to_openai``), the new message's attachments
  after its text; the client's parameters pass through unchanged, its tools as it
  declared them (another API's function tools translated, ``chat_tool``).
- An answer (``answer``) and a stream's chunks (``deltas``) read into the turn's shape.
- The client's answer (``completion``, ``chunk``) and its ``usage`` (``usage``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loci.apis.media import openai_parts, split_media
from loci.apis.shapes import (
    ChatAnswerChunk,
    ChatBase,
    ChatChunk,
    ChatCompletion,
    ChatMessage,
    ChatUsage,
)
from loci.apis.turn import (
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
from loci.apis.wire import JSONObject, mapping, message_text, read_usage
from loci.errors import ValidationError
from loci.models import Usage

if TYPE_CHECKING:  # the context renders itself with the API modules
    from loci.context.compiled import CompiledContext

#: Messages API parameters (from the Messages face) and Responses ones (from the
#: Responses face) that the Chat Completions API does not know.
FOREIGN_PARAMS = frozenset({"thinking", "top_k", "context_management", "reasoning"})
_TOOL_MEDIA = "(the images and files of the tool results above)"


def messages(context: CompiledContext, system: Sequence[Mapping[str, Any]],
             attachments: Sequence[Mapping[str, Any]] = ()) -> list[JSONObject]:
    """Chat Completions ``messages``: the client's system text first (Loci is a guest in
    its agent), then Loci's context, the attachments after the new message's text."""
    out = [{"role": "system", "content": block["text"]} for block in system]
    out += context.to_openai()
    if attachments and out[-1]["role"] == "tool":
        # A tool message holds text only: the results' images follow as the user's.
        out.append({"role": "user", "content": [
            {"type": "text", "text": _TOOL_MEDIA}, *openai_parts(attachments)]})
    elif attachments:
        last = out[-1]
        out[-1] = {**last, "content": [{"type": "text", "text": last["content"]},
                                       *openai_parts(attachments)]}
    return out


def read_messages(given: Sequence[Mapping[str, Any]]) -> list[Message]:
    """A client's chat messages as the turn's."""
    return [read_message(message) for message in given]


def read_message(message: Mapping[str, Any]) -> Message:
    role, content = message.get("role"), message.get("content")
    if role in ("system", "developer"):
        return Message("system", system_texts(content))
    if role == "tool":
        call_id = str(message.get("tool_call_id") or "")
        return Message("tool", (ToolResult(call_id, content_parts(content)),))
    if role == "user":
        return Message("user", content_parts(content))
    if role == "assistant":
        calls = tuple(read_call(call) for call in message.get("tool_calls") or ())
        return Message("assistant", content_parts(content) + calls)
    raise ValidationError(f"unknown message role {role!r}")


def system_texts(content: Any) -> tuple[Text, ...]:
    """A system message's content as text parts (empty text left out); a text block's
    ``cache_control`` (the Messages face's) is kept."""
    parts = content if isinstance(content, list) else [content]
    texts = []
    for part in parts:
        text = part if isinstance(part, str) else mapping(part).get("text")
        if isinstance(text, str) and text.strip():
            mark = mapping(part).get("cache_control")
            texts.append(Text(text, mark if isinstance(mark, Mapping) and mark else None))
    return tuple(texts)


def content_parts(content: Any) -> tuple[Text | Media, ...]:
    """A message's ``content`` (text, or text parts and attachments) as parts."""
    texts, media = split_media(content)
    text = message_text(texts if media else content)
    return ((Text(text),) if text else ()) + tuple(Media(part) for part in media)


def read_call(call: Any) -> ToolCall:
    """A tool call in OpenAI's shape (an upstream's, a client's); one without a name
    is read with an empty one (refused where it is recorded)."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise ValidationError("each tool call needs a 'function' object")
    return ToolCall(str(call.get("id") or ""), str(function.get("name") or ""),
                    function.get("arguments"))


def write_messages(messages: Sequence[Message]) -> list[JSONObject]:
    """The turn's messages as chat messages."""
    out: list[JSONObject] = []
    for message in messages:
        result = message.result
        if result is not None:
            out.append({"role": "tool", "tool_call_id": result.call_id,
                        "content": _content(message)})
            continue
        written: JSONObject = {"role": message.role, "content": _content(message)}
        if message.calls:
            written["content"] = written["content"] or None
            written["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.calls]
        out.append(written)
    return out


def _content(message: Message) -> str | list[JSONObject]:
    media: list[JSONObject] = [dict(part.original) for part in message.media]
    return [{"type": "text", "text": message.text}, *media] if media else message.text


def tools(declared: Sequence[Mapping[str, Any]]) -> tuple[Tool, ...]:
    """A chat request's ``tools``: function tools named, any other kept as it came."""
    out = []
    for tool in declared:
        function = mapping(tool.get("function"))
        name = function.get("name") if tool.get("type", "function") == "function" else None
        out.append(Tool("chat", tool, name if isinstance(name, str) else None,
                        function.get("description"), function.get("parameters"),
                        function.get("strict")))
    return tuple(out)


def chat_tool(tool: Tool) -> Mapping[str, Any]:
    """``tool`` as a chat tool: a chat client's as it came, another API's function."""
    if tool.api == "chat":
        return tool.original
    if tool.kind is not None:
        raise ValidationError(f"the {tool.kind} tool is Anthropic's: it needs an "
                              "Anthropic upstream ([proxy] provider = \"anthropic\")")
    fields = {"name": tool.name, "description": tool.description,
              "parameters": tool.parameters, "strict": tool.strict}
    return {"type": "function", "function": {k: v for k, v in fields.items()
                                             if v is not None}}


def request_body(request: Request, *, stream: bool) -> JSONObject:
    """The Chat Completions request for ``request``."""
    params = {k: v for k, v in request.params.items() if k not in FOREIGN_PARAMS}
    effort = mapping(request.params.get("reasoning")).get("effort")
    if effort and "reasoning_effort" not in params:  # the Responses face's, in chat
        params["reasoning_effort"] = effort
    if request.tools:
        params["tools"] = [chat_tool(tool) for tool in request.tools]
    body = {**params, "model": request.model,
            "messages": messages(request.context, request.system, request.attachments)}
    if stream:  # the usage comes in a last chunk when asked for
        body["stream"] = True
        body["stream_options"] = {**mapping(params.get("stream_options")),
                                  "include_usage": True}
    return body


def answer(payload: Mapping[str, Any]) -> Completion:
    """A Chat Completions payload's first choice."""
    choices = payload.get("choices") or [{}]
    choice = mapping(choices[0])
    message = mapping(choice.get("message"))
    return Completion(
        content=message_text(message.get("content")),
        finish_reason=str(choice.get("finish_reason") or "stop"),
        usage=read_usage(payload.get("usage")),
        tool_calls=message.get("tool_calls") or None,
        id=payload.get("id") if isinstance(payload.get("id"), str) else None,
    )


def deltas(chunks: list[ChatAnswerChunk]) -> Iterator[Delta]:
    """The deltas of a read's chunks, each run of chunks that hold only text for the
    first choice made one delta (as ``memory.stream.joined`` does, without a delta per
    chunk: most chunks are such)."""
    texts: list[str] = []
    for chunk in chunks:
        content = text_only(chunk)
        if content is not None:
            texts.append(content)
            continue
        if text := "".join(texts):
            yield Delta(content=text)
        texts.clear()
        yield from _chunk_deltas(chunk)
    if text := "".join(texts):
        yield Delta(content=text)


def text_only(chunk: Any) -> str | None:
    """The text of a streamed chunk that adds text to the first choice and nothing
    else, or None."""
    choices = chunk.get("choices") if type(chunk) is dict else None
    choice = choices[0] if type(choices) is list and len(choices) == 1 else None
    if type(choice) is dict and chunk.get("usage") is None \
            and not choice.get("finish_reason") and not choice.get("index", 0):
        delta = choice.get("delta")
        if type(delta) is dict and not delta.get("tool_calls"):
            content = delta.get("content")
            return content if type(content) is str else None
    return None


def _chunk_deltas(chunk: Mapping[str, Any]) -> Iterator[Delta]:
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        yield Delta(usage=read_usage(usage))
    for choice in chunk["choices"]:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta = mapping(choice.get("delta"))
        yield Delta(content=message_text(delta.get("content")),
                    finish_reason=choice.get("finish_reason"),
                    tool_calls=delta.get("tool_calls") or None)


def usage(spent: Usage) -> ChatUsage:
    """OpenAI's Chat Completions ``usage`` object."""
    return {"prompt_tokens": spent.input_tokens, "completion_tokens": spent.output_tokens,
            "total_tokens": spent.input_tokens + spent.output_tokens,
            "prompt_tokens_details": {"cached_tokens": spent.cached_tokens}}


def completion(base: ChatBase, clean: str, answered: Completion, spent: Usage
               ) -> ChatCompletion:
    """The client's ``chat.completion``: the clean reply, the answer's tool calls."""
    message: ChatMessage = {"role": "assistant", "content": clean}
    if answered.tool_calls:
        message["tool_calls"] = answered.tool_calls
    return {**base, "id": answered.id or base["id"], "object": "chat.completion",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": answered.finish_reason}],
            "usage": usage(spent)}


def chunk(base: ChatBase, delta: JSONObject, finish_reason: str | None = None
          ) -> ChatChunk:
    """An OpenAI ``chat.completion.chunk`` with one choice."""
    return {**base, "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
