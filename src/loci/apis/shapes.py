"""The typed shapes of the JSON bodies Loci builds for the three APIs or reads field by
field from them: Chat Completions, Anthropic Messages, OpenAI Responses.

They are ``TypedDict``s: they cost nothing at run time (a body stays a plain dict, read
and written as it is) and are not checked there: what a client sends is checked where it
comes in (``server.proxy_requests``), what an upstream answers by its client (``llm``)
and ``apis.sound``. A part of a body whose shape Loci does not rely on (a tool's schema,
a block passed back as it came) is a ``JSONObject`` (``apis.wire``).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from loci.apis.wire import JSON, JSONObject

# -- Chat Completions --------------------------------------------------------------------


class ChatFunction(TypedDict):
    name: str | None
    #: JSON text (a few upstreams send an object).
    arguments: JSON


class ChatToolCall(TypedDict):
    """A tool call of an answer in OpenAI's shape, whatever API gave it: as the
    upstream gave it (an id or a name may be missing) until ``apis.sound`` checks it,
    before anything of it is recorded or answered."""

    id: str | None
    type: str
    function: ChatFunction


class ChatMessage(TypedDict):
    role: str
    content: str | list[JSONObject] | None
    tool_calls: NotRequired[list[ChatToolCall]]
    tool_call_id: NotRequired[str]


class ChatAnswerChoice(TypedDict):
    message: JSONObject


class ChatAnswer(TypedDict):
    """An upstream's answer, as its client checked it: a first choice with a message
    (``llm.openai_compat``)."""

    choices: list[ChatAnswerChoice]
    id: NotRequired[JSON]
    model: NotRequired[JSON]
    usage: NotRequired[JSON]


class ChatAnswerChunk(TypedDict):
    """A chunk of an upstream's stream, as its client checked it: a ``choices`` list."""

    choices: list[JSON]
    usage: NotRequired[JSON]


class ChatUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, int]


class ChatChoice(TypedDict):
    index: int
    message: ChatMessage
    finish_reason: str


class ChatChunkChoice(TypedDict):
    index: int
    delta: JSONObject
    finish_reason: str | None


class ChatBase(TypedDict):
    """What every answer of one call carries (``id``, ``created``, ``model``)."""

    id: str
    created: int
    model: str


class ChatCompletion(ChatBase):
    object: Literal["chat.completion"]
    choices: list[ChatChoice]
    usage: ChatUsage


class ChatChunk(ChatBase):
    object: Literal["chat.completion.chunk"]
    choices: list[ChatChunkChoice]


class ChatUsageChunk(ChatChunk):
    """The last chunk of a stream whose client asked for the usage."""

    usage: ChatUsage


# -- Anthropic Messages ------------------------------------------------------------------


class AnthropicTurn(TypedDict):
    """A message of a request: its content blocks are Loci's own text, ``tool_use``
    and ``tool_result`` blocks and the client's as they came (``Any``: the compiled
    context adds its own to them)."""

    role: str
    content: list[Any]


class AnthropicAnswer(TypedDict):
    """An upstream's ``message``, as its client checked it: a ``content`` list
    (``llm.anthropic``)."""

    content: list[JSON]
    id: NotRequired[JSON]
    model: NotRequired[JSON]
    stop_reason: NotRequired[JSON]
    usage: NotRequired[JSON]


class AnthropicUsage(TypedDict):
    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    output_tokens: int


class AnthropicMessage(TypedDict):
    """A ``message`` answer. Its content blocks: text, ``tool_use`` and the blocks kept
    as they came (thinking, compaction)."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[JSONObject]
    stop_reason: str
    stop_sequence: str | None
    usage: AnthropicUsage


# -- OpenAI Responses --------------------------------------------------------------------


class ResponsesUsage(TypedDict):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens_details: dict[str, int]


class ResponsesAnswer(TypedDict):
    """An upstream's ``response``, as its client checked it: an ``output`` list
    (``llm.openai_compat``)."""

    output: list[JSON]
    id: NotRequired[JSON]
    usage: NotRequired[JSON]
    incomplete_details: NotRequired[JSON]


class ResponsesText(TypedDict):
    type: Literal["output_text"]
    text: str
    annotations: list[JSONObject]


class ResponsesMessage(TypedDict):
    type: Literal["message"]
    id: str
    status: str
    role: Literal["assistant"]
    content: list[ResponsesText]


class ResponsesCall(TypedDict):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: JSON
    status: str


class ResponsesCompaction(TypedDict):
    """The answer of ``/responses/compact``: the user's messages and a compaction item."""

    id: str
    object: Literal["response.compaction"]
    created_at: int
    output: list[JSONObject]
    usage: ResponsesUsage


class Response(TypedDict):
    """A ``response`` object (as the client's answer, and in its stream's events)."""

    id: str
    object: Literal["response"]
    created_at: int
    status: str
    model: str
    output: list[ResponsesMessage | ResponsesCall]
    error: JSONObject | None
    incomplete_details: JSONObject | None
    instructions: str | None
    metadata: JSONObject
    parallel_tool_calls: bool
    tool_choice: str
    tools: list[JSONObject]
    temperature: float | None
    top_p: float | None
    usage: ResponsesUsage
