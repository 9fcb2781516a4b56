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
``proxy_types.sound_completion``): checked before its usage or anything of the turn is
recorded. No upstream configured is 503; ``[proxy] timeout`` bounds each upstream call,
a streamed one in all.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, Header
from fastapi import Request as HttpRequest
from fastapi.responses import StreamingResponse
from pydantic import Field, field_validator
from pydantic import ValidationError as SchemaError

from loci.apis import chat
from loci.apis.chat import chunk
from loci.apis.turn import Completion, Delta, Message, Request, Tool
from loci.apis.wire import mapping
from loci.engine import Loci
from loci.errors import LociError, ProviderError, ValidationError
from loci.memory.stream import TagFilter
from loci.models import Usage
from loci.server import proxy_memory
from loci.server.deps import hub_of, principal_of
from loci.server.proxy_requests import CHAT_MESSAGES, CHAT_TOOLS, ChatParams, checked, first_problem
from loci.server.proxy_stream import batched, sse
from loci.server.proxy_types import Upstream, sound_calls, sound_completion, sound_text
from loci.server.proxy_upstream import OWN_FIELDS, make_upstream, provider_edits
from loci.turns import merge_fragments, record_answer, take_in

router = APIRouter(tags=["proxy"])
log = logging.getLogger(__name__)
_IMPORTED_ROLES = ("user", "assistant")


async def get_proxy_engine(request: HttpRequest) -> Loci:
    """The caller's engine, as for REST, except that in open mode the bearer token is
    ignored: OpenAI clients always send one, whatever text their ``api_key`` holds."""
    return hub_of(request).engine(principal_of(request, bearer_optional=True))


Engine = Annotated[Loci, Depends(get_proxy_engine)]


class ChatRequest(ChatParams):
    """An OpenAI chat-completions request (``proxy_requests``); fields Loci does not use
    pass through."""

    model: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    user: str | None = None
    tools: list[dict[str, Any]] | None = None

    @field_validator("messages")
    @classmethod
    def _messages(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], checked(CHAT_MESSAGES, value, "messages"))

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        return None if value is None else cast(list[dict[str, Any]],
                                               checked(CHAT_TOOLS, value, "tools"))

    def params(self) -> dict[str, Any]:
        given = self.model_dump(exclude_unset=True, exclude=set(OWN_FIELDS))
        return {k: v for k, v in given.items() if v is not None}

    def asked(self) -> Asked:
        return Asked(self.model, chat.read_messages(self.messages), self.params(),
                     chat.tools(self.tools or ()))


@dataclass(frozen=True)
class Asked:
    """What a face read from its request: the turn's messages, the client's model, its
    parameters (in the Chat Completions vocabulary, plus its API's own) and tools."""

    model: str
    messages: list[Message]
    params: dict[str, Any]
    tools: tuple[Tool, ...] = ()
    #: The client's ``anthropic-beta`` header (``apis.turn.Request.beta``).
    beta: str | None = None


def chat_params(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters another face's request means, checked as Chat Completions checks
    them (its own fields never among them): a translation the chat shape refuses is the
    client's error."""
    fields = {k: v for k, v in params.items() if k not in OWN_FIELDS}
    try:
        given = ChatParams.model_validate(fields).model_dump(exclude_unset=True)
    except SchemaError as exc:
        raise ValidationError(f"the request{first_problem(exc)}") from None
    return {k: v for k, v in given.items() if v is not None}


@router.get("/models")
def list_models(loci: Engine) -> dict[str, Any]:
    """The models this proxy offers (``[proxy] models``, default: the configured one)."""
    names = loci.settings.proxy.models or [loci.settings.model]
    return {"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "loci"} for name in names]}


@router.post("/chat/completions", response_model=None)
def chat_completions(
    loci: Engine, body: ChatRequest,
    x_loci_session: Annotated[str | None, Header()] = None,
) -> dict[str, Any] | StreamingResponse:
    """OpenAI's chat completions, with Loci's context in and memory out."""
    session = x_loci_session or body.user
    if not session:
        raise ValidationError("name the session: send the header 'X-Loci-Session: <name>' "
                              "or the request's 'user' field")
    if body.params().get("n", 1) != 1:
        raise ValidationError("the proxy returns one choice: leave n at 1")
    with upstream_for(loci, body.stream) as upstream:
        turn = ProxyTurn(loci, session, body.asked())
        if not body.stream:
            return turn.complete(upstream)
        return event_stream(turn.stream(upstream, started(upstream, turn)))


@contextmanager
def upstream_for(loci: Loci, stream: bool) -> Iterator[Upstream]:
    """The configured upstream (none: a 503 before anything is recorded), closed when
    the request is done with it: at once, or, streamed, by the stream it then feeds."""
    upstream = make_upstream(loci.settings)
    try:
        yield upstream
    except BaseException:
        upstream.close()
        raise
    if not stream:
        upstream.close()


def started(upstream: Upstream, turn: ProxyTurn) -> Iterator[Delta]:
    """The upstream's stream of ``turn``'s request with its first event already read, so
    that an upstream that is down or refuses the call is still an HTTP 502, not a broken
    200 stream."""
    turn.began = time.perf_counter()
    turn.deadline = time.monotonic() + turn.loci.settings.proxy.timeout
    try:
        deltas = upstream.stream(turn.request)
        first = next(deltas, Delta())
    except BaseException:
        upstream.close()
        raise
    return itertools.chain([first], deltas)


def event_stream(events: Iterator[bytes]) -> StreamingResponse:
    return StreamingResponse(batched(events), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


#: How long a call waits for the facts of the turns recorded before it to be saved
#: (``loci.memory.live``), so that what the user said last time is a memory now.
EXTRACTION_WAIT_SECONDS = 10.0


class ProxyTurn:
    """One proxied exchange: the new message, its compiled context, the recording."""

    def __init__(self, loci: Loci, session: str, asked: Asked, *, face: str = "chat"
                 ) -> None:
        self.loci, self.session, self.asked, self.face = loci, session, asked, face
        #: The usage of every upstream call made for the client's request so far, and
        #: when the last one was sent (``time.perf_counter``).
        self.spent, self.began = Usage(), 0.0
        #: When the streamed answer being relayed must have ended (``time.monotonic``).
        self.deadline = float("inf")
        loci.wait_extracted(EXTRACTION_WAIT_SECONDS)
        self.intake = take_in(loci, session, asked.messages)
        self.message = self.intake.message  # None once recorded
        self.edits = provider_edits(loci.settings, asked.params)
        context = loci.compile(session, self.intake.shown, model=asked.model, guest=True,
                               provider_edits=self.edits)
        self.request = Request(asked.model, context, self.intake.system, asked.params,
                               self.intake.attachments, asked.beta, asked.tools)
        self.base = {"id": f"chatcmpl-loci-{secrets.token_hex(12)}",
                     "created": int(time.time()), "model": asked.model}

    def record(self, reply: str, tool_calls: list[Any] | None = None,
               blocks: list[dict[str, Any]] | None = None) -> str:
        """Append the user's message (if this call brought one), the reply and its tool
        calls, the turn's first event keeping the provider's ``blocks``; returns the
        clean reply."""
        return record_answer(self.loci, self.session, self.message, reply, tool_calls,
                             blocks, model=self.asked.model).clean

    def answer(self, upstream: Upstream) -> Completion:
        """The upstream's answer; rounds of memory-tool calls that Loci runs itself
        (``proxy_memory``) are recorded, run and asked again first."""
        answer = self.call(upstream)
        name = proxy_memory.memory_tool(self.loci, self.request.tools)
        for _ in range(proxy_memory.MAX_ROUNDS):
            if not proxy_memory.only_calls_to(name, answer.tool_calls):
                break
            self.run_memory(answer.content, answer.tool_calls or [], answer.blocks)
            answer = self.call(upstream)
        return answer

    def call(self, upstream: Upstream) -> Completion:
        """The upstream's answer, checked before its usage is recorded: a malformed one
        leaves no trace."""
        self.began = time.perf_counter()
        answer = sound_completion(upstream.complete(self.request))
        self.meter(answer.usage)
        return answer

    def meter(self, usage: Usage | None) -> None:
        """Record the usage of the upstream call just answered, before its answer is
        recorded (``UsageLedger.record``). A failure to record is logged: the answer
        matters more than its bill."""
        usage = usage or Usage()
        self.spent += usage
        try:
            self.loci.usage.record(
                self.session, usage, model=self.asked.model, face=self.face,
                latency_ms=(time.perf_counter() - self.began) * 1000,
                context=self.request.context,
                client_text=[block["text"] for block in self.request.system])
        except LociError as exc:
            log.warning("usage of session %r not recorded: %s", self.session, exc)

    def run_memory(self, reply: str, calls: list[Any],
                   blocks: list[dict[str, Any]] | None) -> str:
        """Record a round of memory-tool calls, run them, record their results and
        compile the next request; returns the round's clean text."""
        clean = self.record(reply, calls, blocks)
        self.loci.add_events(self.session, proxy_memory.run(self.loci, calls))
        self.message = None  # recorded: the log holds it from now on
        context = self.loci.compile(self.session, None, model=self.asked.model, guest=True,
                                    provider_edits=self.edits)
        self.request = replace(self.request, context=context, attachments=[])
        return clean

    def complete(self, upstream: Upstream) -> dict[str, Any]:
        answer = self.answer(upstream)
        clean = self.record(answer.content, answer.tool_calls, answer.blocks)
        return chat.completion(self.base, clean, answer, self.spent)

    def stream(self, upstream: Upstream, deltas: Iterator[Delta]) -> Iterator[bytes]:
        """SSE chunks as the upstream's text arrives, tags held back (see
        ``memory.stream``), then the finish reason, the usage if asked for, [DONE]."""
        try:
            yield sse(chunk(self.base, {"role": "assistant", "content": ""}))
            yield from self._relay(upstream, deltas)
        except LociError as exc:
            yield sse({"error": {"type": type(exc).__name__, "message": str(exc)}})
        finally:
            upstream.close()

    def _relay(self, upstream: Upstream, deltas: Iterator[Delta]) -> Iterator[bytes]:
        relay = Relay(self, upstream)
        for delta in relay.rounds(deltas):
            if text := relay.feed(delta):
                yield sse(chunk(self.base, {"content": text}))
            if delta.tool_calls:
                yield sse(chunk(self.base, {"tool_calls": delta.tool_calls}))
        if rest := relay.end():
            yield sse(chunk(self.base, {"content": rest}))
        yield sse(chunk(self.base, {}, relay.finish))
        if mapping(self.asked.params.get("stream_options")).get("include_usage"):
            yield sse({**self.base, "object": "chat.completion.chunk", "choices": [],
                       "usage": chat.usage(self.spent)})
        yield sse("[DONE]")


class Relay:
    """One streamed answer as every face relays it: text as soon as it can be shown
    (tags held back), tool-call pieces, finish reason and usage collected; at the end
    the turn is recorded and the clean text's rest returned."""

    def __init__(self, turn: ProxyTurn, upstream: Upstream) -> None:
        self.turn, self.upstream, self.tags = turn, upstream, TagFilter()
        self.fragments: list[Any] = []
        self.finish = "stop"
        self.usage: Usage | None = None
        self.clean = ""
        #: The clean text of the memory-tool rounds already recorded (``rounds``).
        self.earlier = ""
        self.calls: list[dict[str, Any]] | None = None
        self.blocks: list[dict[str, Any]] = []

    def rounds(self, deltas: Iterator[Delta]) -> Iterator[Delta]:
        """``deltas``, then, while every call of a round is to the memory tool Loci runs
        (``proxy_memory``), the next round's: such a round's text is shown, its calls
        run and recorded, never shown. A round's calls, finish and usage are held back
        until its end shows whose calls they are."""
        name = proxy_memory.memory_tool(self.turn.loci, self.turn.request.tools)
        for _ in range(proxy_memory.MAX_ROUNDS if name else 0):
            held: list[Delta] = []
            for delta in deltas:
                if delta.tool_calls or delta.finish_reason or delta.usage:
                    held.append(delta)
                else:
                    yield delta
            calls = merge_fragments([p for d in held for p in d.tool_calls or ()])
            if not proxy_memory.only_calls_to(name, calls):
                yield from held
                return
            sound_calls(calls)  # before the round's usage or calls are recorded
            self.turn.meter(next((d.usage for d in reversed(held) if d.usage), None))
            clean = self.turn.run_memory(self.tags.raw, calls, self.blocks or None)
            rest = self.tags.finish(clean)
            self.tags, self.blocks, self.earlier = TagFilter(), [], self.earlier + clean
            if rest:  # the round's text not shown yet (through the next round's filter)
                yield Delta(content=rest)
            deltas = started(self.upstream, self.turn)
        yield from deltas

    def feed(self, delta: Delta) -> str:
        """The text of ``delta`` that can be shown now ("" if none)."""
        if time.monotonic() > self.turn.deadline:  # trickling: each read in time, not all
            raise ProviderError(f"the upstream did not finish its answer within "
                                f"{self.turn.loci.settings.proxy.timeout:g}s ([proxy] timeout)")
        self.fragments += delta.tool_calls or ()
        self.blocks += delta.blocks or ()
        self.finish = delta.finish_reason or self.finish
        self.usage = delta.usage or self.usage
        return self.tags.feed(sound_text(delta.content)) if delta.content else ""

    def end(self) -> str:
        """Record the turn (once its calls are known to be whole); the clean text not
        shown yet."""
        self.calls = merge_fragments(self.fragments) or None
        sound_calls(self.calls)
        self.turn.meter(self.usage)
        clean = self.turn.record(self.tags.raw, self.calls, self.blocks or None)
        self.clean = self.earlier + clean
        return self.tags.finish(clean)
