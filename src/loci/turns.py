"""One LLM call of a session, as ``Loci.turn``/``Loci.reply`` and the proxy make it.

A client holds its conversation as a list of messages in its API's shape and sends it
whole on every call; ``loci.apis`` reads them into the turn's typed messages
(``apis.turn.Message``). Loci's log is the history, so only what is new is recorded,
once:

- The **last message is the new one**: the user's, or the results of the tool calls of
  the assistant's last answer (a trailing run of ``tool`` messages).
- If the session has no events yet, the client's earlier user and assistant messages
  are imported first (a conversation started elsewhere keeps its history); otherwise
  they are ignored, because Loci holds them (compacted, summarized, searchable).
- Tool results are recorded at once (the context must show them), each once, so a
  retried call records nothing twice; the assistant's calls they answer are recorded
  first if the log lacks them. Upstreams reuse ids (``call_0`` in every answer): an
  answer's calls of one id are the log's newest of that id, position by position, by
  name while they wait for their results and also by arguments once answered; the
  k-th result of an id answers the k-th call (``_LoggedCalls``). Calls that bring the
  same messages take turns (the store's saves lock, ``Store.saving``, in every
  process), so that each records them once.
- The user's new message is recorded with the answer (``record_answer``): a call that
  fails leaves no trace and may simply be retried.
- The client's system messages are its own instructions: sent first, never stored.

Works on a :class:`SessionLog` (``Loci`` is one), so this module sits below the engine.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from loci.apis import anthropic, chat, client, responses
from loci.apis.media import logged
from loci.apis.turn import PROVIDER_BLOCKS, Message, Text, ToolCall
from loci.checks import check_text
from loci.context.compiled import CompiledContext
from loci.errors import NotFoundError, ValidationError
from loci.eventlog import check_message
from loci.memory.service import ReplyResult
from loci.models import Event, Scope, SessionInfo, Usage
from loci.store.base import Store
from loci.usage import UsageLedger

#: How far back the session's live events are searched for the calls being answered.
RECENT_EVENTS = 500
_IMPORTED_ROLES = ("user", "assistant")


class SessionLog(Protocol):
    """What a turn needs of a scope's view (``Loci``)."""

    def session(self, session: str) -> SessionInfo: ...

    def events(self, session: str, *, include_archived: bool = True) -> list[Event]: ...

    def add_events(self, session: str, events: Sequence[dict[str, Any]]) -> list[Event]: ...

    def add(self, session: str, role: str, content: str, **metadata: Any) -> Event: ...

    def add_reply(self, session: str, text: str, **metadata: Any
                  ) -> tuple[Event, ReplyResult]: ...

    @property
    def usage(self) -> UsageLedger: ...

    #: Its store and scope: a turn holds the store's saves lock (``Store.saving``)
    #: between reading what the log holds and writing what it lacks.
    store: Store
    scope: Scope


@dataclass(frozen=True)
class Intake:
    """What a call's messages bring."""

    #: The user's new message as the log will keep it (a line per attachment), recorded
    #: with the answer; None when the call brings tool results (recorded already).
    message: str | None
    #: The text to compile the context around (the message without attachment lines).
    shown: str | None
    #: The images, documents and audio that go to the model with the call.
    attachments: list[dict[str, Any]]
    #: The client's own system text, as text blocks (``apis.anthropic.system_block``).
    system: list[dict[str, Any]]


def take_in(log: SessionLog, session: str, messages: Sequence[Message]) -> Intake:
    """Record what ``messages`` bring that the log lacks: an imported history for a new
    session, tool results; the new user message is returned, not recorded."""
    with log.store.saving(log.scope):
        return _take_in(log, session, messages)


def _take_in(log: SessionLog, session: str, messages: Sequence[Message]) -> Intake:
    if not messages:
        raise ValidationError("send at least one message")
    system = [anthropic.system_block(text) for m in messages if m.role == "system"
              for text in m.parts if isinstance(text, Text)]
    talk = [m for m in messages if m.role != "system"]
    last = talk[-1] if talk else None
    if last is not None and last.role == "user":
        attachments = [dict(part.original) for part in last.media]
        message = check_message("user", check_text("message", logged(last.text,
                                                                     attachments)))
        earlier = talk[:-1]
        if earlier and earlier[-1].role == "tool":
            # The user's turn also answers the last calls (Messages: tool_result blocks
            # and text in one turn, as when the user interrupts a tool): results first.
            earlier, results = split_results(earlier)
            import_history(log, session, earlier[:-1])
            record_results(log, session, earlier[-1], results)
        else:
            import_history(log, session, earlier)
        return Intake(message, last.text or message, attachments, system)
    if last is not None and last.role == "tool":
        earlier, results = split_results(talk)
        import_history(log, session, earlier[:-1])
        record_results(log, session, earlier[-1], results)
        # A screenshot tool's image goes to the model after the results.
        media = [dict(part.original) for result in results for part in result.media]
        return Intake(None, None, media, system)
    raise ValidationError("the last message must be the user's new message or the "
                          "results of the assistant's tool calls")


def import_history(log: SessionLog, session: str, earlier: Sequence[Message]) -> None:
    """A new session starts with the client's earlier user and assistant messages; an
    existing one ignores them (Loci's log already is its history)."""
    try:
        log.session(session)
        return
    except NotFoundError:
        pass
    said = [(m.role, _logged(m)) for m in earlier if m.role in _IMPORTED_ROLES]
    events = [{"type": "message", "role": role, "content": text}
              for role, text in said if text.strip()]
    if events:
        log.add_events(session, events)


def _logged(message: Message) -> str:
    return logged(message.text, [part.original for part in message.media])


def record_answer(log: SessionLog, session: str, message: str | None, reply: str,
                  tool_calls: Sequence[Any] | None = None,
                  blocks: Sequence[dict[str, Any]] | None = None, **metadata: Any
                  ) -> ReplyResult:
    """Append the user's ``message`` (if the call brought one), the ``reply`` with its
    tags saved and stripped, and its tool calls; the turn's first event keeps the
    provider's ``blocks``."""
    kept = {PROVIDER_BLOCKS: list(blocks)} if blocks else {}
    replying = bool(reply.strip()) or not tool_calls
    # Everything checked before the first write: a turn is recorded whole or not at all.
    check_text("reply", reply)
    calls = call_events([chat.read_call(call) for call in tool_calls or ()],
                        None if replying else kept)
    if message is not None:
        log.add(session, "user", message)
    result = ReplyResult(reply, [], [])
    if replying:
        _, result = log.add_reply(session, reply, **metadata, **kept)
    if calls:
        log.add_events(session, calls)
    return result


def merge_fragments(fragments: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Streamed tool-call pieces as whole calls: OpenAI streams each call's id and name
    first, then its arguments in pieces, every piece with the call's ``index``."""
    calls: dict[int, dict[str, Any]] = {}
    for piece in fragments:
        index = int(piece.get("index", len(calls)))
        call = calls.setdefault(index, {"id": "", "type": "function",
                                        "function": {"name": "", "arguments": ""}})
        call["id"] = piece.get("id") or call["id"]
        function = piece.get("function") or {}
        call["function"]["name"] = function.get("name") or call["function"]["name"]
        piece_arguments = function.get("arguments") or ""
        if isinstance(piece_arguments, str):
            call["function"]["arguments"] += piece_arguments
        else:  # an object is the whole arguments, not a piece of their text
            call["function"]["arguments"] = json.dumps(piece_arguments, ensure_ascii=False)
    return [calls[i] for i in sorted(calls)]


def call_events(calls: Sequence[ToolCall], metadata: dict[str, Any] | None = None
                ) -> list[dict[str, Any]]:
    """``tool_call`` events for an assistant's tool calls; the first one carries
    ``metadata`` (the turn's provider blocks)."""
    events: list[dict[str, Any]] = []
    for call in calls:
        if not call.name:
            raise ValidationError("a tool call without a function name")
        events.append({"type": "tool_call", "role": "assistant", "tool_name": call.name,
                       "tool_call_id": call.id, "args": _arguments(call.arguments)})
    if events and metadata:
        events[0]["metadata"] = metadata
    return events


def _arguments(raw: Any) -> dict[str, Any]:
    """A call's arguments as the object they encode (OpenAI sends a JSON string)."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        value = None
    return value if isinstance(value, dict) else {"arguments": raw}


def split_results(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(the messages before, the trailing run of ``tool`` messages); the message just
    before the run must be the assistant's, with the tool calls they answer."""
    start = len(messages)
    while start and messages[start - 1].role == "tool":
        start -= 1
    earlier, results = list(messages[:start]), list(messages[start:])
    if not earlier or earlier[-1].role != "assistant" or not earlier[-1].calls:
        raise ValidationError("tool results must follow the assistant message whose "
                              "tool_calls they answer")
    call_events(earlier[-1].calls)  # their shape, before anything is written
    return earlier, results


def record_results(log: SessionLog, session: str, asked: Message,
                   results: Sequence[Message]) -> None:
    """Append what the log lacks of the assistant's calls (``asked``: when the exchange
    did not come through Loci) and of their results, in one write."""
    try:
        recent = log.events(session, include_archived=False)
    except NotFoundError:  # the session's first exchange
        recent = []
    log_calls = _LoggedCalls(recent[-RECENT_EVENTS:])
    blocks = [dict(block.original) for block in asked.blocks]
    calls = call_events(asked.calls, {PROVIDER_BLOCKS: blocks} if blocks else None)
    held = log_calls.matching(calls)
    fresh = [call for call, known in zip(calls, held, strict=True) if known is None]
    # The k-th result of an id answers the k-th call of that id.
    of_id: dict[str, list[int]] = {}
    for at, call in enumerate(calls):
        of_id.setdefault(call["tool_call_id"], []).append(at)
    for message in results:
        call_id = message.result.call_id if message.result is not None else ""
        if call_id not in of_id:
            raise ValidationError(f"tool result for an unknown call {call_id!r}")
        if not of_id[call_id]:
            continue  # a second result for one call
        at = of_id[call_id].pop(0)
        known = held[at]
        if known is None or known.id not in log_calls.answered:
            fresh.append({"type": "tool_result", "role": "tool", "tool_call_id": call_id,
                          "tool_name": calls[at]["tool_name"], "content": _logged(message)})
    if fresh:
        log.add_events(session, fresh)


class _LoggedCalls:
    """The tool calls of the log's recent events: by id in order, with the turn each
    was made in (a message starts the next), those answered (a result answers the
    oldest call of its id still waiting), and those still waiting for their result (a
    call left unanswered before a message is abandoned, not waiting)."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.of_id: dict[str, list[tuple[int, Event]]] = {}
        self.answered: set[int] = set()
        waiting: dict[str, list[Event]] = {}
        turn = 0
        for event in events:
            if event.type == "message":
                turn += 1
                waiting.clear()
            elif event.tool_call_id is None:
                continue
            elif event.type == "tool_call":
                self.of_id.setdefault(event.tool_call_id, []).append((turn, event))
                waiting.setdefault(event.tool_call_id, []).append(event)
            elif event.type == "tool_result" and waiting.get(event.tool_call_id):
                self.answered.add(waiting[event.tool_call_id].pop(0).id)
        self.waiting = {event.id for queue in waiting.values() for event in queue}

    def matching(self, calls: Sequence[dict[str, Any]]) -> list[Event | None]:
        """For each of ``calls`` (an answer's), the logged call it is, or None for a
        new one. An answer's calls of one id are the newest calls of that id, made in
        one turn, position by position (upstreams that number calls per answer reuse
        ids); one is the logged call while it waits for its result (however a face
        rendered its arguments), once answered only with the same arguments (a retry)."""
        count = Counter(call["tool_call_id"] for call in calls)
        seen: Counter[str] = Counter()
        held: list[Event | None] = []
        for call in calls:
            call_id = call["tool_call_id"]
            group = self.of_id.get(call_id, [])[-count[call_id]:]
            at, seen[call_id] = seen[call_id], seen[call_id] + 1
            logged = group[at][1] if len(group) == count[call_id] and len(
                {turn for turn, _ in group}) == 1 else None
            same = logged is not None and logged.tool_name == call["tool_name"] and (
                logged.id in self.waiting or (logged.id in self.answered and (
                    logged.args or {}) == call["args"]))
            held.append(logged if same else None)
        return held


def meter(log: SessionLog, session: str, usage: Usage, context: CompiledContext,
          system: Sequence[Mapping[str, Any]], **details: Any) -> None:
    """Record one model call in the usage ledger: its usage, the context it was sent
    (``model`` its model unless ``details`` name the client's), the client's own system
    text beside it; ``details``: the face, the latency (``UsageLedger.record``)."""
    log.usage.record(session, usage, **{"model": context.model, **details}, context=context,
                     client_text=[block["text"] for block in system])


def answer_turn(log: SessionLog, turn: Turn, answer: Any) -> ReplyResult:
    """Record ``turn``'s ``answer`` (any shape ``apis.client.read_answer`` reads): its
    usage in the ledger first, if it carries one, then the user's message and the
    answer (``record_answer``)."""
    if turn.answered:
        raise ValidationError("this turn's answer is recorded already: start the next "
                              "call with Loci.turn")
    completion = client.read_answer(answer)
    usage = completion.usage
    if usage.input_tokens or usage.output_tokens:
        meter(log, turn.session, usage, turn.context, turn.intake.system)
    result = record_answer(log, turn.session, turn.message, completion.content,
                           completion.tool_calls, completion.blocks, model=turn.context.model)
    turn.answered = True
    return result


@dataclass
class Turn:
    """The context of one LLM call of ``session`` (``Loci.turn``), in the shape of the
    caller's API: pass ``request`` to the provider's SDK, then the answer to
    ``Loci.reply``."""

    session: str
    #: "openai" (Chat Completions), "anthropic" (Messages) or "responses".
    api: str
    context: CompiledContext
    intake: Intake
    #: For "anthropic": send the assistant turns' signed thinking blocks back.
    thinking: bool = False
    #: Set once the answer is recorded: a turn is answered once.
    answered: bool = field(default=False, compare=False)

    @property
    def message(self) -> str | None:
        """The new user message, recorded with the answer (None: tool results)."""
        return self.intake.message

    @property
    def request(self) -> dict[str, Any]:
        """The call's keyword arguments for the provider's SDK: ``{"messages": ...}``
        (OpenAI Chat), ``{"system": ..., "messages": ...}`` (Anthropic) or
        ``{"input": ...}`` (Responses); the caller adds its model, tools and the rest."""
        system, media = self.intake.system, self.intake.attachments
        if self.api == "anthropic":
            return anthropic.context_request(self.context, system, media,
                                             thinking=self.thinking)
        if self.api == "responses":
            return {"input": responses.context_input(self.context, system, media)}
        return {"messages": chat.messages(self.context, system, media)}
