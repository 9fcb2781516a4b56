"""The turn every API module reads into and writes from, whatever API the client and the
upstream speak: a :class:`Request` (Loci's compiled context, the client's system text,
attachments, tools and parameters), and the answer as a :class:`Completion` or a stream
of :class:`Delta`.

What must reach an upstream of the client's own API as the client sent it keeps its
original beside the fields every API understands: a :class:`Tool` (Anthropic's memory
tool, ``cache_control``), a provider block (a signed thinking block, a compaction item,
a reasoning item: ``Completion.blocks``). A tool call is OpenAI's shape
(``{"id", "type": "function", "function": {"name", "arguments"}}``) in every API
module, the shape the event log records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from loci.apis.wire import JSON, JSONObject

if TYPE_CHECKING:
    from loci.apis.shapes import ChatToolCall
from loci.models import Usage

if TYPE_CHECKING:  # the context renders itself with the API modules
    from loci.context.compiled import CompiledContext

#: The API shapes Loci reads and writes.
Api = Literal["chat", "anthropic", "responses"]
#: The metadata key under which an event keeps the provider blocks of its turn.
PROVIDER_BLOCKS = "provider_blocks"
#: Anthropic's kept blocks (signed thinking; its own compaction's summary); the
#: Responses API's.
THINKING_BLOCKS = ("thinking", "redacted_thinking")
COMPACTION_BLOCKS = ("compaction",)
REASONING_ITEMS = ("reasoning",)
#: A provider's context edit that clears old tool results itself (Anthropic's
#: ``clear_tool_uses_20250919``): with it, Loci leaves tool outputs whole.
CLEARS_TOOLS = "clear_tool_uses"
#: A provider's edit that compacts the conversation itself (Anthropic's
#: ``compact_20260112``): its ``compaction`` block stands for what came before it, so
#: Loci's history and Loci's own compactions start there.
COMPACTS = "compact_"


@dataclass(frozen=True)
class Text:
    text: str
    #: Anthropic's cache mark on a system text block, as the client set it.
    cache_control: Mapping[str, JSON] | None = None


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    #: The arguments as the API sent them: JSON text (or, from a few, an object).
    arguments: JSON


@dataclass(frozen=True)
class Media:
    """An image, document or audio clip as the client sent it: an OpenAI content part or
    an Anthropic block (``apis.media`` translates it for the other API)."""

    original: Mapping[str, Any]


@dataclass(frozen=True)
class ProviderBlock:
    """A block that must go back to its provider as it came: a signed thinking block, a
    compaction block, a reasoning item."""

    original: Mapping[str, Any]


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    content: tuple[Text | Media, ...] = ()


Part = Text | ToolCall | ToolResult | Media | ProviderBlock
Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class Message:
    """A message of the client's conversation, read from its API's shape: a ``system``
    message holds text, a ``tool`` message one result, the user's text and media, the
    assistant's text, tool calls and provider blocks."""

    role: Role
    parts: tuple[Part, ...] = ()

    @property
    def text(self) -> str:
        return "".join(p.text for p in self._content() if isinstance(p, Text))

    @property
    def media(self) -> list[Media]:
        return [p for p in self._content() if isinstance(p, Media)]

    @property
    def calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def blocks(self) -> list[ProviderBlock]:
        return [p for p in self.parts if isinstance(p, ProviderBlock)]

    @property
    def result(self) -> ToolResult | None:
        return next((p for p in self.parts if isinstance(p, ToolResult)), None)

    def _content(self) -> tuple[Part, ...]:
        result = self.result
        return result.content if result is not None else self.parts


@dataclass(frozen=True)
class Tool:
    """A tool the client declared, as its API defines it (``original``), with the
    fields any other API needs: ``name`` is None for a tool that is no function (an
    OpenAI custom or built-in tool), which only its own API can take."""

    api: Api
    original: Mapping[str, Any]
    name: str | None
    description: str | None = None
    #: The JSON schema of the arguments, as the client gave it (checked by the API
    #: that needs an object).
    parameters: Any = None
    strict: bool | None = None

    @property
    def kind(self) -> str | None:
        """Anthropic's tool type (``memory_20250818``, ``web_search_...``); None for a
        custom tool or another API's."""
        kind = self.original.get("type") if self.api == "anthropic" else None
        return None if kind in (None, "custom") else str(kind)


@dataclass(frozen=True)
class Request:
    """What to send: the client's model and parameters around Loci's compiled context."""

    model: str
    context: CompiledContext
    #: The client's own system text, sent before Loci's context: text blocks, with the
    #: client's ``cache_control`` where it set one (``apis.anthropic.system_block``).
    system: list[JSONObject]
    #: The client's other parameters, in the Chat Completions vocabulary
    #: (``max_tokens``, ``stop``, ``tool_choice`` ...) plus its API's own, passed on.
    params: JSONObject
    #: Images, documents, audio of the new message, as the client sent them
    #: (``apis.media``): they follow its text.
    attachments: list[JSONObject] = field(default_factory=list)
    #: The client's ``anthropic-beta`` header, for an Anthropic upstream: the features
    #: it enables (the memory tool, context management, ...) are the client's to ask.
    beta: str | None = None
    tools: tuple[Tool, ...] = ()


@dataclass
class Completion:
    """A model's answer in one shape, whatever API gave it."""

    content: str
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[ChatToolCall] | None = None
    id: str | None = None
    #: Provider blocks that must go back as they came (Anthropic ``thinking`` and
    #: ``redacted_thinking`` with their signatures), in their order.
    blocks: list[JSONObject] | None = None


@dataclass
class Delta:
    """A piece of a streamed answer."""

    content: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None
    #: OpenAI-shaped pieces of tool calls, each with the call's ``index``.
    tool_calls: list[JSONObject] | None = None
    #: Whole provider blocks (see :class:`Completion`), each once it has ended.
    blocks: list[JSONObject] | None = None


def joined(deltas: Iterable[Delta]) -> Iterator[Delta]:
    """``deltas`` (an upstream's of one network read) with each run of text-only ones
    made one: what relays them (the tag filter, a face's encoder, the write) then works
    per read, not per event. Anything else (a tool call's piece, a block, the finish or
    the usage) keeps its place between the runs."""
    texts: list[str] = []
    for delta in deltas:
        if not (delta.finish_reason or delta.usage is not None or delta.tool_calls
                or delta.blocks):
            texts.append(delta.content)
            continue
        if text := "".join(texts):
            yield Delta(content=text)
        texts.clear()
        yield delta
    if text := "".join(texts):
        yield Delta(content=text)
