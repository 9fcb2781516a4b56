"""What a library caller hands ``Loci.turn`` and ``Loci.reply`` in its API's shape: its
messages (``messages``) and the model's answer (``read_answer``), as dicts or as the
providers' SDK objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from loci.apis import anthropic, chat, responses
from loci.apis.shapes import ChatToolCall
from loci.apis.turn import Completion, Message
from loci.apis.wire import as_dict, message_text
from loci.errors import ValidationError

#: The APIs whose message shapes a turn reads and writes.
APIS = ("openai", "anthropic", "responses")


def messages(given: Any, api: str, system: Any = None) -> list[Message]:
    """The caller's messages, as its API shapes them, as the turn's messages: text (the
    user's new message), one message, or a list (dicts or the SDK's objects, such as an
    answer's message appended as it came); ``system``: the caller's own system prompt
    (text, or Anthropic text blocks), sent first."""
    if api not in APIS:
        raise ValidationError(f"api must be one of {', '.join(APIS)}")
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    elif isinstance(given, Mapping) or not isinstance(given, Sequence):
        given = [given]
    items = [as_dict(m) for m in given]
    out = [anthropic.system_message(system)] if system else []
    for item in items:
        if api == "anthropic":
            out += anthropic.read_message(item)
        elif api == "responses":
            responses.read_item(out, item)
        else:
            out.append(chat.read_message(item))
    return out


def read_answer(answer: Any) -> Completion:
    """Any model answer as a :class:`Completion`: text; a chat ``message`` dict (the
    assistant's, with ``tool_calls``); a Chat Completions, Messages or Responses payload
    (dict or SDK object)."""
    if isinstance(answer, Completion):
        return answer
    if isinstance(answer, str):
        return Completion(content=answer)
    data = as_dict(answer)
    if "choices" in data:
        return chat.answer(data)
    if "output" in data:
        return responses.answer(data)
    if data.get("type") == "message" or (isinstance(data.get("content"), list) and (
            data.get("role") == "assistant" and "tool_calls" not in data)):
        return anthropic.answer(data)
    if data.get("role") == "assistant":
        return Completion(content=message_text(data.get("content")),
                          tool_calls=cast("list[ChatToolCall] | None",
                                          data.get("tool_calls") or None))
    raise ValidationError("an answer must be text, an assistant message, or a Chat "
                          "Completions, Messages or Responses result")
