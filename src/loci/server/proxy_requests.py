"""What each face of the proxy accepts, checked at the edge before anything runs.

Every request body is first read as JSON Loci can store and send on (``sound_json``):
finite numbers (Python's JSON reader takes ``NaN``, ``Infinity`` and ``1e400``, which no
API and no JSON writer accepts), integers within 64 bits, text UTF-8 can encode (no lone
surrogates), at most ``MAX_DEPTH`` levels. Then the parts Loci reads are checked against
the shapes of their API (``ChatMessage``, ``AnthropicMessage``, ``ResponsesItem`` and
their tools): a field of the wrong type is a 422 naming it, before a session is touched,
as the providers refuse such requests. Fields Loci does not read pass through to the
upstream as the client sent them.

The request models keep the client's messages as the dicts it sent (the turn reads and
forwards them as they are); the typed models here only decide whether they are sound
(``checked``).
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    TypeAdapter,
    model_validator,
)
from pydantic import ValidationError as SchemaError

from loci.apis.wire import JSONObject

#: Levels of nesting a request may have (a tool's JSON schema is the deepest part).
MAX_DEPTH = 64
_INT64 = 2 ** 63


def sound_json(value: Any) -> None:
    """A ``ValueError`` naming the first place where ``value`` is not JSON Loci can store
    and send on; nothing if it is."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"{where or 'the body'} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            for key, child in item.items():
                _text(key, f"{where}.{key!r}" if where else repr(key))
                stack.append((child, f"{where}.{key}" if where else key, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{n}]", depth + 1) for n, child in enumerate(item))
        elif isinstance(item, str):
            _text(item, where)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{where}: numbers must be finite (not {item})")
        elif isinstance(item, int) and not isinstance(item, bool) and not (
                -_INT64 <= item < _INT64):
            raise ValueError(f"{where}: integers must fit in 64 bits")


def _text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{where} holds an unpaired surrogate at character {exc.start}: "
                         "send valid Unicode text") from None


class Part(BaseModel):
    """A model of one part of a request: what Loci reads is typed, the rest passes."""

    model_config = ConfigDict(extra="allow")


class FaceRequest(Part):
    """A face's request: sound JSON first, then its typed fields."""

    @model_validator(mode="before")
    @classmethod
    def _sound(cls, data: Any) -> Any:
        sound_json(data)
        return data


def checked(adapter: TypeAdapter[Any], value: Any, field: str) -> Any:
    """``value`` as it came, if ``adapter`` validates it; else a ``ValueError`` naming
    the first wrong place under ``field``."""
    try:
        adapter.validate_python(value)
    except SchemaError as exc:
        raise ValueError(f"{field}{first_problem(exc)}") from None
    return value


def first_problem(exc: SchemaError) -> str:
    """Where the first problem of ``exc`` is, and what: ``[3].content: Input should ...``
    (of a value that matches no type of a union, the problem found deepest in it)."""
    error = max(exc.errors(), key=lambda e: len(e["loc"]))
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
    return f"{where}: {error['msg']}"


# -- OpenAI Chat Completions -------------------------------------------------------------

class ChatFunctionCall(Part):
    name: str
    arguments: str | JSONObject | None = None


class ChatToolCall(Part):
    id: str | None = None
    type: str = "function"
    function: ChatFunctionCall


class ChatMessage(Part):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[JSONObject] | None = None
    tool_calls: list[ChatToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class ChatFunction(Part):
    name: str
    description: str | None = None
    parameters: JSONObject | None = None


class ChatTool(Part):
    type: str = "function"
    function: ChatFunction | None = None


CHAT_MESSAGES: TypeAdapter[list[ChatMessage]] = TypeAdapter(list[ChatMessage])
CHAT_TOOLS: TypeAdapter[list[ChatTool]] = TypeAdapter(list[ChatTool])


class StreamOptions(Part):
    include_usage: StrictBool | None = None


class ChatParams(FaceRequest):
    """The Chat Completions parameters Loci or its upstreams read."""

    stream: StrictBool = False
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    n: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    tool_choice: str | JSONObject | None = None
    parallel_tool_calls: StrictBool | None = None
    stream_options: StreamOptions | None = None
    reasoning_effort: str | None = None


# -- Anthropic Messages ------------------------------------------------------------------

class AnthropicSource(Part):
    type: str
    media_type: str | None = None
    data: str | None = None
    url: str | None = None

    @model_validator(mode="after")
    def _base64(self) -> AnthropicSource:
        if self.type == "base64":
            try:
                base64.b64decode(self.data or "", validate=True)
            except (binascii.Error, ValueError):
                raise ValueError("data is not base64") from None
        return self


class AnthropicBlock(Part):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: JSONObject | None = None
    tool_use_id: str | None = None
    content: str | list[AnthropicBlock] | None = None
    source: AnthropicSource | None = None
    thinking: str | None = None
    signature: str | None = None
    cache_control: JSONObject | None = None


class AnthropicMessage(Part):
    role: Literal["user", "assistant"]
    content: str | list[AnthropicBlock]


class AnthropicTool(Part):
    name: str
    type: str | None = None
    description: str | None = None
    input_schema: JSONObject | None = None


class AnthropicTextBlock(Part):
    type: Literal["text"]
    text: str
    cache_control: JSONObject | None = None


ANTHROPIC_MESSAGES: TypeAdapter[list[AnthropicMessage]] = TypeAdapter(list[AnthropicMessage])
ANTHROPIC_TOOLS: TypeAdapter[list[AnthropicTool]] = TypeAdapter(list[AnthropicTool])


class AnthropicToolChoice(Part):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: StrictBool | None = None


class AnthropicMetadata(Part):
    user_id: str | None = None


# -- OpenAI Responses --------------------------------------------------------------------

class ResponsesPart(Part):
    type: str
    text: str | None = None
    image_url: str | None = None
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None
    detail: str | None = None


class ResponsesItem(Part):
    type: str = "message"
    role: str | None = None
    content: str | list[ResponsesPart] | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | list[JSONObject] | None = None


class ResponsesTool(Part):
    type: str
    name: str | None = None
    description: str | None = None
    parameters: JSONObject | None = None
    strict: StrictBool | None = None


RESPONSES_ITEMS: TypeAdapter[list[ResponsesItem]] = TypeAdapter(list[ResponsesItem])
RESPONSES_TOOLS: TypeAdapter[list[ResponsesTool]] = TypeAdapter(list[ResponsesTool])
