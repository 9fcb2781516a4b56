"""The proxy's route skeleton, whatever face the client speaks (``proxy``,
``proxy_messages``, ``proxy_responses``): ``serve`` takes the runtime's upstream, starts
the library's :class:`~loci.Exchange` and answers, or relays the stream. A face decodes
its request into an :class:`~loci.Asked` and encodes the answer behind the
:class:`Face` protocol.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from fastapi.responses import StreamingResponse
from pydantic import ValidationError as SchemaError

from loci import Asked, Exchange, Loci, LociError, Relay, Upstream, Usage, ValidationError
from loci.apis.turn import Completion, Delta
from loci.apis.wire import JSONObject
from loci.server.proxy_requests import ChatParams, first_problem
from loci.server.proxy_stream import batched
from loci.server.proxy_upstream import OWN_FIELDS


def chat_params(params: JSONObject) -> JSONObject:
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

    def answer(self, clean: str, answer: Completion, spent: Usage) -> Mapping[str, object]:
        ...

    def events(self, turn: Exchange, relay: Relay, deltas: Iterator[Delta]
               ) -> Iterator[bytes]: ...

    def error(self, exc: LociError) -> bytes: ...


def serve(loci: Loci, session: str, asked: Asked, face: Face, *, stream: bool
          ) -> Mapping[str, object] | StreamingResponse:
    """Every face's route: the upstream (none: a 503 before anything is recorded), the
    turn, then the answer recorded and encoded, or the stream relayed."""
    upstream = loci.runtime.upstream()  # the runtime's, kept for every call
    turn = Exchange.start(loci, session, asked, face=face.name)
    if not stream:
        answer = turn.answer(upstream)
        clean = turn.record(answer.content, answer.tool_calls, answer.blocks)
        return face.answer(clean, answer, turn.spent)
    deltas = turn.stream(upstream)
    return event_stream(_events(face, turn, upstream, deltas))


def _events(face: Face, turn: Exchange, upstream: Upstream, deltas: Iterator[Delta]
            ) -> Iterator[bytes]:
    try:
        yield from face.events(turn, Relay(turn, upstream), deltas)
    except LociError as exc:
        yield face.error(exc)


def event_stream(events: Iterator[bytes]) -> StreamingResponse:
    return StreamingResponse(batched(events), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


