"""The proxy's OpenAI Responses upstream (``[proxy] provider = "openai-responses"``):
the request every face makes, sent to ``POST {base_url}/responses``.

Out: the client's system text as ``developer`` messages, then Loci's context as input
items (``CompiledContext.to_responses``: messages, ``function_call`` and
``function_call_output`` items), stateless (``store: false``) with the reasoning's
``encrypted_content`` asked for; the client's chat-shaped parameters translated
(``max_tokens`` → ``max_output_tokens``, function tools and ``tool_choice`` flattened).
Back: the output's ``message`` text, its ``function_call`` items as OpenAI tool calls,
and its ``reasoning`` items whole (``Completion.blocks``): kept with the turn, they go
back in front of it on every later request, as a reasoning model needs them in a tool
loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loci.context.requests import responses_input
from loci.errors import ValidationError
from loci.llm.answers import Completion, responses_answer, responses_call
from loci.llm.openai_compat import OpenAIResponses
from loci.llm.wire import mapping
from loci.server.proxy_stream import joined
from loci.server.proxy_types import Delta, UpstreamRequest

#: Chat parameters a Responses request takes as they are.
_PASSED = ("temperature", "top_p", "parallel_tool_calls", "reasoning", "service_tier",
           "metadata", "prompt_cache_key", "safety_identifier")


class ResponsesUpstream:
    """A server of OpenAI's Responses API behind every face of the proxy."""

    def __init__(self, api: OpenAIResponses) -> None:
        self.api = api

    def complete(self, request: UpstreamRequest) -> Completion:
        return responses_answer(self.api.send(request_body(request, stream=False)))

    def stream(self, request: UpstreamRequest) -> Iterator[Delta]:
        calls = 0  # the answer's function calls so far
        for events in self.api.send_batches(request_body(request, stream=True)):
            deltas = []
            for data in events:
                if (delta := _delta(data, calls)) is not None:
                    calls += len(delta.tool_calls or ())
                    deltas.append(delta)
            yield from joined(deltas)

    def close(self) -> None:
        self.api.close()


def request_body(request: UpstreamRequest, *, stream: bool) -> dict[str, Any]:
    """The Responses request for ``request``."""
    params = request.params
    items = responses_input(request.context, request.system, request.attachments)
    body: dict[str, Any] = {"model": request.model, "input": items, "store": False,
                            "include": ["reasoning.encrypted_content"]}
    tokens = params.get("max_tokens") or params.get("max_completion_tokens")
    if tokens:
        body["max_output_tokens"] = tokens
    for name in _PASSED:
        if params.get(name) is not None:
            body[name] = params[name]
    if params.get("reasoning_effort") and "reasoning" not in body:
        body["reasoning"] = {"effort": params["reasoning_effort"]}
    if params.get("tools"):
        body["tools"] = [_tool(tool) for tool in params["tools"]]
    if params.get("tool_choice") is not None:
        body["tool_choice"] = _tool_choice(params["tool_choice"])
    if stream:
        body["stream"] = True
    return body


def _tool(tool: Any) -> dict[str, Any]:
    """A chat tool as a Responses function tool (its definition flattened)."""
    function = mapping(mapping(tool).get("function"))
    if mapping(tool).get("type") != "function" or not isinstance(function.get("name"), str):
        raise ValidationError("a Responses upstream takes function tools only")
    return {"type": "function", **{k: function[k] for k in (
        "name", "description", "parameters", "strict") if function.get(k) is not None}}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    name = mapping(mapping(choice).get("function")).get("name")
    if not isinstance(name, str):
        raise ValidationError("tool_choice must be \"auto\", \"required\", \"none\" or "
                              "{\"type\": \"function\", \"function\": {\"name\": ...}}")
    return {"type": "function", "name": name}


def _delta(data: dict[str, Any], calls: int) -> Delta | None:
    """What a streamed event adds to the answer, if anything; ``calls`` function calls
    came before it."""
    kind = data.get("type")
    if kind == "response.output_text.delta":
        return Delta(content=str(data.get("delta") or ""))
    if kind == "response.output_item.done":
        item = mapping(data.get("item"))
        if item.get("type") == "reasoning":
            return Delta(blocks=[dict(item)])
        if item.get("type") == "function_call":
            return Delta(tool_calls=[{**responses_call(item), "index": calls}])
    elif kind in ("response.completed", "response.incomplete"):
        done = responses_answer(mapping(data.get("response")))
        return Delta(finish_reason="tool_calls" if calls else done.finish_reason,
                     usage=done.usage)
    return None
