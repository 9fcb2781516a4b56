"""One proxied exchange, whatever face the client speaks (``proxy``, ``proxy_messages``,
``proxy_responses``): the route skeleton (``serve``: session → turn → upstream →
answer or stream), the turn (``ProxyTurn``: the new message recorded and the context
compiled, the upstream called, its usage metered, memory-tool rounds run, the answer
recorded) and the stream relay (``Relay``). A face decodes its request into an
:class:`Asked` and encodes the answer behind the :class:`Face` protocol.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from fastapi.responses import StreamingResponse
from pydantic import ValidationError as SchemaError

from loci import Intake, Loci, LociError, ProviderError, TagFilter, Upstream, Usage, ValidationError
from loci.apis.turn import Completion, Delta, Message, Request, Tool
from loci.server import proxy_memory
from loci.server.proxy_requests import ChatParams, first_problem
from loci.server.proxy_stream import batched
from loci.server.proxy_types import sound_calls, sound_completion, sound_text
from loci.server.proxy_upstream import OWN_FIELDS, provider_edits
from loci.turns import merge_fragments, meter, record_answer, take_in

log = logging.getLogger(__name__)


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


class Face(Protocol):
    """How a face answers its client: the whole answer, or a stream's events."""

    #: The face's name in the usage ledger ("chat", "messages", "responses").
    name: str

    def answer(self, clean: str, answer: Completion, spent: Usage) -> dict[str, Any]: ...

    def events(self, turn: ProxyTurn, relay: Relay, deltas: Iterator[Delta]
               ) -> Iterator[bytes]: ...

    def error(self, exc: LociError) -> bytes: ...


def serve(loci: Loci, session: str, asked: Asked, face: Face, *, stream: bool
          ) -> dict[str, Any] | StreamingResponse:
    """Every face's route: the upstream (none: a 503 before anything is recorded), the
    turn, then the answer recorded and encoded, or the stream relayed."""
    upstream = loci.runtime.upstream()  # the runtime's, kept for every call
    turn = ProxyTurn.start(loci, session, asked, face=face.name)
    if not stream:
        answer = turn.answer(upstream)
        clean = turn.record(answer.content, answer.tool_calls, answer.blocks)
        return face.answer(clean, answer, turn.spent)
    deltas = started(upstream, turn)
    return event_stream(_events(face, turn, upstream, deltas))


def _events(face: Face, turn: ProxyTurn, upstream: Upstream, deltas: Iterator[Delta]
            ) -> Iterator[bytes]:
    try:
        yield from face.events(turn, Relay(turn, upstream), deltas)
    except LociError as exc:
        yield face.error(exc)


def started(upstream: Upstream, turn: ProxyTurn) -> Iterator[Delta]:
    """The upstream's stream of ``turn``'s request with its first event already read, so
    that an upstream that is down or refuses the call is still an HTTP 502, not a broken
    200 stream."""
    turn.began = time.perf_counter()
    turn.deadline = time.monotonic() + turn.loci.settings.proxy.timeout
    deltas = upstream.stream(turn.request)
    return itertools.chain([next(deltas, Delta())], deltas)


def event_stream(events: Iterator[bytes]) -> StreamingResponse:
    return StreamingResponse(batched(events), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


#: How long a call waits for the facts of the turns recorded before it to be saved
#: (``loci.memory.live``), so that what the user said last time is a memory now.
EXTRACTION_WAIT_SECONDS = 10.0


class ProxyTurn:
    """One proxied exchange: the new message, its compiled context, the recording."""

    def __init__(self, loci: Loci, session: str, asked: Asked, intake: Intake,
                 request: Request, *, face: str = "chat") -> None:
        self.loci, self.session, self.asked, self.face = loci, session, asked, face
        self.intake, self.request = intake, request
        self.message = intake.message  # None once recorded
        #: The usage of every upstream call made for the client's request so far, and
        #: when the last one was sent (``time.perf_counter``).
        self.spent, self.began = Usage(), 0.0
        #: When the streamed answer being relayed must have ended (``time.monotonic``).
        self.deadline = float("inf")

    @classmethod
    def start(cls, loci: Loci, session: str, asked: Asked, *, face: str = "chat"
              ) -> ProxyTurn:
        """The turn ``asked`` begins: what its messages bring that the log lacks is
        recorded (``turns.take_in``), the context compiled around the new message."""
        loci.wait_extracted(EXTRACTION_WAIT_SECONDS)
        intake = take_in(loci, session, asked.messages)
        context = loci.compile(session, intake.shown, model=asked.model, guest=True,
                               provider_edits=provider_edits(loci.settings, asked.params))
        request = Request(asked.model, context, intake.system, asked.params,
                          intake.attachments, asked.beta, asked.tools)
        return cls(loci, session, asked, intake, request, face=face)

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
            meter(self.loci, self.session, usage, self.request.context, self.request.system,
                  model=self.asked.model, face=self.face,
                  latency_ms=(time.perf_counter() - self.began) * 1000)
        except LociError as exc:
            log.warning("usage of session %r not recorded: %s", self.session, exc)

    def run_memory(self, reply: str, calls: list[Any],
                   blocks: list[dict[str, Any]] | None) -> str:
        """Record a round of memory-tool calls, run them, record their results and
        compile the next request; returns the round's clean text."""
        clean = self.record(reply, calls, blocks)
        self.loci.add_events(self.session, proxy_memory.run(self.loci, calls))
        self.message = None  # recorded: the log holds it from now on
        context = self.loci.compile(
            self.session, None, model=self.asked.model, guest=True,
            provider_edits=provider_edits(self.loci.settings, self.asked.params))
        self.request = replace(self.request, context=context, attachments=[])
        return clean


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
