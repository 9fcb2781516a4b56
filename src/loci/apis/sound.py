"""An upstream's answer checked before anything of it is stored: an answer no API gives
(a tool call without an id or a function name, text with a lone surrogate, a content
block that is no object) is the upstream's failure (``MalformedReplyError``, a 502), and
the turn is not recorded."""

from __future__ import annotations

import json
from typing import Any

from loci.apis.turn import Completion
from loci.errors import ProviderError


class MalformedReplyError(ProviderError):
    """The upstream answered something its API never answers."""


def sound_text(text: Any, what: str = "text") -> str:
    if not isinstance(text, str):
        raise MalformedReplyError(f"the upstream answered {what} that is not a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedReplyError(f"the upstream answered {what} that is not valid Unicode "
                                  "(a lone surrogate)") from None
    return text


def sound_calls(calls: list[Any] | None) -> None:
    """Each tool call is an object with an id and a function name (OpenAI's shape);
    arguments an upstream sent as an object become the JSON string that shape has, so
    that every face relays a string (and Messages reads it back as ``input``)."""
    for call in calls or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise MalformedReplyError("the upstream answered a tool call without a function")
        if not call.get("id") or not isinstance(call["id"], str):
            raise MalformedReplyError("the upstream answered a tool call without an id")
        if not function.get("name") or not isinstance(function["name"], str):
            raise MalformedReplyError("the upstream answered a tool call without a "
                                      "function name")
        arguments = function.get("arguments")
        if not isinstance(arguments, str | dict | None):
            raise MalformedReplyError("the upstream answered tool-call arguments that are "
                                      "neither a JSON string nor an object")
        if isinstance(arguments, dict):
            arguments = function["arguments"] = json.dumps(arguments, ensure_ascii=False)
        sound_text(call["id"] + function["name"] + (arguments or ""), "a tool call")


def sound_completion(answer: Completion) -> Completion:
    """``answer``, if every part of it can be recorded and relayed."""
    sound_text(answer.content)
    sound_calls(answer.tool_calls)
    if not all(isinstance(block, dict) for block in answer.blocks or ()):
        raise MalformedReplyError("the upstream answered a content block that is not an "
                                  "object")
    return answer
