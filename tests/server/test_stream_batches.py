"""A fast upstream's stream is relayed a network read at a time (issue 48, item 2): the
SSE decoder reads whole events out of any split of the bytes, and through the real
proxy the text of thousands of upstream events reaches each face's client in a few
events, whole, with its memory tag removed."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from loci import load_settings
from loci.llm._http import SSEDecoder, data_of, events_of, parse_sse
from loci.memory.tags import parse_reply
from loci.server import create_app
from loci.testing import FakeProvider, Fault
from loci.testing.fake_answers import (
    anthropic_events,
    openai_events,
    responses_answer,
    responses_events,
)
from tests.server.conftest import LiveServer

STREAM = ("data: one\r\n\r\n: a comment\nevent: named\ndata: two\ndata: lines\r\r"
          "data:no space\n\ndata: café ☕\n\n\n\ndata: {\"a\": 1}\n\nevent: x\ndata: last")
REPLY = "Sure. [MEMORY:fact] likes long answers [/MEMORY] " + "Here are words. " * 500
CLEAN = parse_reply(REPLY).clean


def reference(text: str) -> list[tuple[str, str]]:
    return [(e.event, e.data) for e in parse_sse(iter(re.split(r"\r\n|\r|\n", text)))]


def decoded(reads: list[bytes]) -> list[tuple[str, str]]:
    decoder = SSEDecoder()
    texts = [decoder.feed(raw) for raw in reads] + [decoder.end()]
    return [(e.event, e.data) for text in texts for e in events_of(text)]


def test_the_decoder_reads_the_same_events_from_any_split_of_the_bytes() -> None:
    raw, rng = STREAM.encode(), random.Random(48)
    expected = reference(STREAM)
    assert [e[1] for e in expected] == ["one", "two\nlines", "no space", "café ☕",
                                        '{"a": 1}', "last"]
    for cut in range(1, len(raw)):  # every place one cut can fall, CRLFs and é's included
        assert decoded([raw[:cut], raw[cut:]]) == expected, cut
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(raw)), 6))
        reads = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        assert decoded(reads) == expected, cuts


def test_data_of_reads_single_line_events_and_falls_back_for_the_rest() -> None:
    assert data_of('data: {"a": 1}\n\ndata: [DONE]') == ['{"a": 1}', "[DONE]"]
    assert data_of("data: a\ndata: b\n\nevent: e\ndata: c") == ["a\nb", "c"]
    assert data_of("data: a\n\n: note\n\ndata: b") == ["a", "b"]


def upstream_body(kind: str) -> bytes:
    """The whole answer's event stream, sent in one write: 4 characters an event."""
    usage = {"prompt_tokens": 5, "completion_tokens": 900, "total_tokens": 905}
    if kind == "openai":
        events = openai_events(REPLY, usage)
        return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + \
            b"data: [DONE]\n\n"
    if kind == "anthropic":
        return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                        for e in anthropic_events(REPLY, {"input_tokens": 5,
                                                          "output_tokens": 900}))
    answer = responses_answer(REPLY, {"input_tokens": 5, "output_tokens": 900,
                                      "total_tokens": 905}, None)
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                    for e in responses_events(answer))


FACES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("/v1/chat/completions", {"model": "m", "stream": True,
                                      "messages": [{"role": "user", "content": "hi"}]}),
    "messages": ("/v1/messages", {"model": "m", "stream": True, "max_tokens": 900,
                                  "messages": [{"role": "user", "content": "hi"}]}),
    "responses": ("/v1/responses", {"model": "m", "stream": True, "input": "hi"}),
}


def texts(face: str, stream: str) -> list[str]:
    """The text deltas of a face's event stream."""
    out = []
    for block in stream.split("\n\n"):
        data = next((line[6:] for line in block.split("\n") if line.startswith("data: ")),
                    None)
        if data is None or data == "[DONE]":
            continue
        event = json.loads(data)
        if face == "chat" and event.get("choices"):
            out.append(event["choices"][0]["delta"].get("content") or "")
        elif face == "messages" and event["type"] == "content_block_delta":
            out.append(event["delta"].get("text", ""))
        elif face == "responses" and event["type"] == "response.output_text.delta":
            out.append(event["delta"])
    return [text for text in out if text]


@pytest.mark.parametrize("upstream", ["openai", "openai-responses", "anthropic"])
@pytest.mark.parametrize("face", list(FACES))
def test_thousands_of_upstream_events_reach_the_client_in_a_few(
        face: str, upstream: str, home: Path, live_server: LiveServer) -> None:
    body = upstream_body({"openai-responses": "responses"}.get(upstream, upstream))
    fault = Fault(200, body, "text/event-stream")
    with FakeProvider(fault=lambda request: fault) as provider:
        app = create_app(load_settings(
            store=f"sqlite:///{home / 'p.db'}", proxy_provider=upstream,
            proxy_base_url=f"{provider.url}/v1", proxy_api_key="k"))
        path, request = FACES[face]
        answer = httpx.post(live_server(app) + path, json=request, timeout=30,
                            headers={"X-Loci-Session": "s"})
    assert answer.status_code == 200, answer.text
    pieces = texts(face, answer.text)
    assert "".join(pieces) == CLEAN and CLEAN.startswith("Sure. Here are words.")
    # The upstream sent one event per 4 characters (2,000): one a read came in.
    assert len(REPLY) // 4 >= 1_900 and len(pieces) < 100, len(pieces)
