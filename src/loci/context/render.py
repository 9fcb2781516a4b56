"""Turning events into the turn's messages (``apis.turn``), which each API module writes
in its shape; as chat messages they are valid input for the OpenAI API.

An event may carry provider blocks that must go back to that provider byte for byte
(Anthropic's signed ``thinking`` blocks, or the ``reasoning`` items of OpenAI's Responses
API with their ``encrypted_content``, of the assistant turn it starts, in
``metadata["provider_blocks"]``): its message keeps them as ``ProviderBlock`` parts,
which the Chat Completions writer leaves out and the Anthropic and Responses ones put
first in the assistant turn, each only its own provider's.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from loci.apis import chat
from loci.apis.turn import (
    COMPACTION_BLOCKS,
    PROVIDER_BLOCKS,
    Message,
    ProviderBlock,
    Role,
    Text,
    ToolCall,
    ToolResult,
)
from loci.models import Event
from loci.store.codec import canonical_json


def events_to_messages(events: Sequence[Event], *, answer_open: bool = True
                       ) -> list[dict[str, Any]]:
    """OpenAI chat messages (``events_to_turn``, written by ``apis.chat``)."""
    return chat.write_messages(events_to_turn(events, answer_open=answer_open))


def events_to_turn(events: Sequence[Event], *, answer_open: bool = True) -> list[Message]:
    """The events as the turn's messages; consecutive tool calls form one assistant
    message, an assistant turn keeps its provider blocks. A tool result follows its
    call as a tool message only while the assistant's calls (then only other results)
    come right before it with its id unanswered (``open``): otherwise a provider would
    refuse it, and it is shown as the user's text. A call left without a result (a
    killed agent, a damaged log) is answered by ``NO_RESULT`` where the next message
    starts, as a provider refuses a call without its result (unless ``answer_open`` is
    False: the messages as they were, for a replay). A call whose id an earlier call
    shown has (upstreams that number calls per answer: ``call_0`` every time) is shown
    with the id made unique, and so is its result: providers refuse a repeated id."""
    messages: list[Message] = []
    open_calls: dict[str, str] = {}  # the id shown → the call's own id, in call order
    shown: set[str] = set()
    for event in events:
        if open_calls and event.type != "tool_result" and not (
                event.type == "tool_call" and messages[-1].role == "assistant"):
            if answer_open:
                messages += _unanswered(open_calls)
            open_calls.clear()
        message, call = _piece(event)
        if call is not None:
            own = call.id
            if own in shown:
                call = replace(call, id=_unique(own, event.id, shown))
                message = Message("assistant", (*message.parts[:-1], call))
            shown.add(call.id)
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant" and last.calls:
                messages[-1] = Message("assistant", (*last.parts, call))
                open_calls[call.id] = own
            else:
                messages.append(message)
                open_calls = {call.id: own}
        elif event.type != "tool_result":
            messages.append(message)
        elif (answered := _answered(open_calls, event.tool_call_id)) is not None:
            messages.append(_answering(message, answered))
            del open_calls[answered]
        else:
            if answer_open:
                messages += _unanswered(open_calls)
            open_calls = {}
            messages.append(_stray_result(event))
    return (messages + _unanswered(open_calls)) if answer_open else messages


#: What answers a call whose result was never recorded.
NO_RESULT = "[no result was recorded for this call]"


def _unique(own: str, event_id: int, shown: set[str]) -> str:
    """An id for a call whose own id was shown before: ``<id>_<event id>``, hashed when
    that is longer than the 40 characters OpenAI takes, never one shown before."""
    candidate = f"{own}_{event_id}"
    if len(candidate) > 40:
        candidate = "call_" + hashlib.blake2b(candidate.encode("utf-8", "surrogatepass"),
                                              digest_size=12).hexdigest()
    while candidate in shown:
        candidate += "_"
    return candidate


def _answered(open_calls: dict[str, str], call_id: str | None) -> str | None:
    """The id shown for the first open call whose own id is ``call_id``, if any."""
    if call_id is not None and open_calls.get(call_id) == call_id:
        return call_id  # the usual case: shown under its own id
    return next((shown for shown, own in open_calls.items() if own == call_id), None)


def _answering(message: Message, call_id: str) -> Message:
    """A result's message answering the call shown as ``call_id``."""
    result = message.result
    assert result is not None
    return message if result.call_id == call_id else Message(
        "tool", (ToolResult(call_id, result.content),))


def _unanswered(open_calls: dict[str, str]) -> list[Message]:
    """Tool messages answering the calls still open (which are then closed)."""
    answers = [Message("tool", (ToolResult(call_id, (Text(NO_RESULT),)),))
               for call_id in open_calls]
    open_calls.clear()
    return answers


#: Each event's message (and call) by the id of the event, for as long as the event
#: lives (a weak reference forgets the entry with it): a session's events are the same
#: objects from one compile to the next (``LiveEvents``), and building their messages
#: again was most of a compile's own work.
_PIECES: dict[int, tuple[weakref.ref[Event], Message, ToolCall | None]] = {}


def _piece(event: Event) -> tuple[Message, ToolCall | None]:
    """The message ``event`` makes on its own (a call's opens an assistant message; a
    result's answers its call), and its call if it is one."""
    held = _PIECES.get(id(event))
    if held is not None and held[0]() is event:
        return held[1], held[2]
    call = None
    if event.type == "tool_call":
        call = ToolCall(event.tool_call_id or f"call_{event.id}", event.tool_name or "",
                        canonical_json(event.args) if event.args else "{}")
        text = (Text(event.content),) if event.content else ()
        message = Message("assistant", (*_blocks(event), *text, call))
    elif event.type == "tool_result":
        content = _result_text(event)
        message = Message("tool", (ToolResult(event.tool_call_id or "",
                                              (Text(content),) if content else ()),))
    else:
        content = event.shown_content
        text = (Text(content),) if content else ()
        message = Message(_role(event.role), (*_blocks(event), *text))
    _PIECES[id(event)] = (weakref.ref(event, partial(_forget, id(event))), message, call)
    return message, call


def _forget(key: int, dead: weakref.ref[Event]) -> None:
    """An event's entry, once the event is gone (and not yet replaced by another's)."""
    held = _PIECES.get(key)
    if held is not None and held[0] is dead:
        del _PIECES[key]


def _result_text(event: Event) -> str:
    return event.content if event.masked is None else event.masked


def _stray_result(event: Event) -> Message:
    """A result that answers no open call, shown as the user's text."""
    name = f" of {event.tool_name}" if event.tool_name else ""
    return Message("user", (Text(f"[tool result{name}, call {event.tool_call_id or '?'}]\n"
                                 f"{_result_text(event)}"),))


def _role(role: str) -> Role:
    return role if role in ("system", "user", "assistant", "tool") else "user"  # type: ignore[return-value]


def _blocks(event: Event) -> tuple[ProviderBlock, ...]:
    if event.role != "assistant" or not event.metadata:
        return ()
    blocks = event.metadata.get(PROVIDER_BLOCKS)
    if not isinstance(blocks, list):
        return ()
    return tuple(ProviderBlock(block) for block in blocks if isinstance(block, dict))


def since_provider_compaction(events: Sequence[Event]) -> list[Event]:
    """``events`` from the turn whose answer holds the provider's latest compaction
    summary on (all of them if none does): the provider ignores what came before that
    answer, which its summary stands for; the user's message that opened the turn stays,
    since a request starts with the user's."""
    for at in range(len(events) - 1, -1, -1):
        blocks = (events[at].metadata or {}).get(PROVIDER_BLOCKS)
        if isinstance(blocks, list) and any(
                isinstance(b, dict) and b.get("type") in COMPACTION_BLOCKS
                and b.get("content") for b in blocks):
            opener = next((n for n in range(at, -1, -1) if events[n].type == "message"
                           and events[n].role == "user"), at)
            return list(events[opener:])
    return list(events)
