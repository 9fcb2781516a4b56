"""One model call of a session as Loci runs it, whatever API its client speaks: the
client's messages read for what is new and recorded (``turns.take_in``), the context
compiled around the new message, the upstream model called (``Runtime.upstream``) and
every call's usage metered, the client's context-management edits left to a provider
that applies them, rounds of Anthropic's memory tool run on the user's ``/memories``
files (``[proxy] memory_tool``), and the answer recorded once it came whole and sound
(``apis.sound``); a streamed answer is relayed with its memory tags held back
(``Relay``). The proxy's faces decode a request into :class:`Asked` and encode what an
:class:`Exchange` answers; a library user may drive one the same way.

Anthropic's memory tool: a client that declares it (``{"type": "memory_20250818",
"name": "memory"}``) but runs nothing of it still gets persistent, versioned, searchable
files: when every call of an answer is to that tool, Loci runs the commands
(``knowledge.memory_files``, the texts of the SDK's own file-system tool), records the
calls and their results like any tool loop, and asks the upstream again; the client gets
the first answer that is not only memory-tool calls (streamed: every round's text as it
comes, ``Relay.rounds``).
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from loci.apis.sound import sound_calls, sound_completion, sound_text
from loci.apis.turn import Completion, Delta, Message, Request, Tool
from loci.apis.wire import JSONObject, mapping
from loci.errors import LociError, ProviderError
from loci.knowledge.memory_files import MemoryFiles
from loci.memory.stream import TagFilter
from loci.models import Usage
from loci.settings import Settings
from loci.turns import Intake, import_history, merge_fragments, meter, record_answer, take_in
from loci.upstreams import Upstream

if TYPE_CHECKING:  # the scope view sits above the domains; only its type is read here
    from loci.compaction.compactor import CompactionResult
    from loci.runtime import Loci

log = logging.getLogger(__name__)


def provider_edits(settings: Settings, params: JSONObject) -> tuple[str, ...]:
    """The types of the client's ``context_management`` edits that the upstream applies
    (an Anthropic upstream; any other drops them)."""
    if settings.upstream_provider != "anthropic":
        return ()
    edits = mapping(params.get("context_management")).get("edits")
    return tuple(str(mapping(e).get("type")) for e in edits or () if mapping(e).get("type"))


@dataclass(frozen=True)
class Asked:
    """What a face read from its request: the turn's messages, the client's model, its
    parameters (in the Chat Completions vocabulary, plus its API's own) and tools."""

    model: str
    messages: list[Message]
    params: JSONObject
    tools: tuple[Tool, ...] = ()
    #: The client's ``anthropic-beta`` header (``apis.turn.Request.beta``).
    beta: str | None = None


#: How long a call waits for the facts of the turns recorded before it to be saved
#: (``loci.memory.live``), so that what the user said last time is a memory now.
EXTRACTION_WAIT_SECONDS = 10.0


class Exchange:
    """One model call of a session run by Loci: the new message recorded and its context
    compiled (``start``), the upstream called and its usage metered, memory-tool rounds
    run, the answer recorded."""

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
              ) -> Exchange:
        """The turn ``asked`` begins: what its messages bring that the log lacks is
        recorded (``turns.take_in``), the context compiled around the new message."""
        loci.wait_extracted(EXTRACTION_WAIT_SECONDS)
        intake = take_in(loci, session, asked.messages)
        context = loci.compile(session, intake.shown, model=asked.model, guest=True,
                               provider_edits=provider_edits(loci.settings, asked.params))
        request = Request(asked.model, context, intake.system, asked.params,
                          intake.attachments, asked.beta, asked.tools)
        return cls(loci, session, asked, intake, request, face=face)

    @staticmethod
    def compact(loci: Loci, session: str, asked: Asked) -> CompactionResult:
        """A client's request to compact its session now: a session Loci has not seen
        starts with the client's earlier messages, then it is compacted."""
        import_history(loci, session, asked.messages)
        return loci.compact(session, model=asked.model)

    def record(self, reply: str, tool_calls: list[Any] | None = None,
               blocks: list[JSONObject] | None = None) -> str:
        """Append the user's message (if this call brought one), the reply and its tool
        calls, the turn's first event keeping the provider's ``blocks``; returns the
        clean reply."""
        return record_answer(self.loci, self.session, self.message, reply, tool_calls,
                             blocks, model=self.asked.model).clean

    def answer(self, upstream: Upstream) -> Completion:
        """The upstream's answer; rounds of memory-tool calls that Loci runs itself
        (``memory_tool``) are recorded, run and asked again first."""
        answer = self.call(upstream)
        name = memory_tool(self.loci, self.request.tools)
        for _ in range(MAX_MEMORY_ROUNDS):
            if not only_calls_to(name, answer.tool_calls):
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
                   blocks: list[JSONObject] | None) -> str:
        """Record a round of memory-tool calls, run them, record their results and
        compile the next request; returns the round's clean text."""
        clean = self.record(reply, calls, blocks)
        self.loci.add_events(self.session, run_memory_tool(self.loci, calls))
        self.message = None  # recorded: the log holds it from now on
        context = self.loci.compile(
            self.session, None, model=self.asked.model, guest=True,
            provider_edits=provider_edits(self.loci.settings, self.asked.params))
        self.request = replace(self.request, context=context, attachments=[])
        return clean

    def stream(self, upstream: Upstream) -> Iterator[Delta]:
        """The upstream's stream of this turn's request with its first event already
        read, so that an upstream that is down or refuses the call fails here (an HTTP
        502 for the proxy), not in the middle of a stream."""
        self.began = time.perf_counter()
        self.deadline = time.monotonic() + self.loci.settings.proxy.timeout
        deltas = upstream.stream(self.request)
        return itertools.chain([next(deltas, Delta())], deltas)


class Relay:
    """One streamed answer as every face relays it: text as soon as it can be shown
    (tags held back), tool-call pieces, finish reason and usage collected; at the end
    the turn is recorded and the clean text's rest returned."""

    def __init__(self, turn: Exchange, upstream: Upstream) -> None:
        self.turn, self.upstream, self.tags = turn, upstream, TagFilter()
        self.fragments: list[Any] = []
        self.finish = "stop"
        self.usage: Usage | None = None
        self.clean = ""
        #: The clean text of the memory-tool rounds already recorded (``rounds``).
        self.earlier = ""
        self.calls: list[JSONObject] | None = None
        self.blocks: list[JSONObject] = []

    def rounds(self, deltas: Iterator[Delta]) -> Iterator[Delta]:
        """``deltas``, then, while every call of a round is to the memory tool Loci runs
        (``memory_tool``), the next round's: such a round's text is shown, its calls
        run and recorded, never shown. A round's calls, finish and usage are held back
        until its end shows whose calls they are."""
        name = memory_tool(self.turn.loci, self.turn.request.tools)
        for _ in range(MAX_MEMORY_ROUNDS if name else 0):
            held: list[Delta] = []
            for delta in deltas:
                if delta.tool_calls or delta.finish_reason or delta.usage:
                    held.append(delta)
                else:
                    yield delta
            calls = merge_fragments([p for d in held for p in d.tool_calls or ()])
            if not only_calls_to(name, calls):
                yield from held
                return
            sound_calls(calls)  # before the round's usage or calls are recorded
            self.turn.meter(next((d.usage for d in reversed(held) if d.usage), None))
            clean = self.turn.run_memory(self.tags.raw, calls, self.blocks or None)
            rest = self.tags.finish(clean)
            self.tags, self.blocks, self.earlier = TagFilter(), [], self.earlier + clean
            if rest:  # the round's text not shown yet (through the next round's filter)
                yield Delta(content=rest)
            deltas = self.turn.stream(self.upstream)
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


#: Rounds of memory-tool calls run for one request before the answer goes back as is.
MAX_MEMORY_ROUNDS = 8


def memory_tool(loci: Loci, tools: Sequence[Tool]) -> str | None:
    """The name of the memory tool the client declared, if Loci is to run it."""
    if not loci.settings.proxy.memory_tool:
        return None
    for tool in tools:
        if (tool.kind or "").startswith("memory_"):
            return tool.name or "memory"
    return None


def only_calls_to(name: str | None, calls: Sequence[Any] | None) -> bool:
    return bool(name and calls) and all(
        (call.get("function") or {}).get("name") == name for call in calls or ())


def run_memory_tool(loci: Loci, calls: Sequence[Mapping[str, Any]]) -> list[JSONObject]:
    """Each call's command run on the memory files, as ``tool_result`` events (a failed
    command's error text is its result, as the SDK's tool answers)."""
    files = MemoryFiles(loci.knowledge)
    events: list[JSONObject] = []
    for call in calls:
        function = call.get("function") or {}
        try:
            command = json.loads(function.get("arguments") or "{}")
            output = files.run(command if isinstance(command, dict) else {})
        except (LociError, ValueError) as exc:
            output = f"Error: {exc}"
        events.append({"type": "tool_result", "role": "tool", "content": output,
                       "tool_call_id": str(call.get("id") or ""),
                       "tool_name": str(function.get("name") or "")})
    return events
