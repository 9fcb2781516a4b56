"""The cases of the proxy fuzzer (``test_proxy_fuzz.py``): hostile requests to the three
faces of the proxy and broken upstream replies, drawn from one seeded ``random.Random``
so that a run is repeatable (the same seed, the same cases).

A case is a request (face, body as raw bytes, headers, streamed or not) and what the
upstream does with it (``Case.upstream``: a reply, or a :class:`Fault`). The request
starts valid and gets up to two mutations: a value of the wrong type at any field,
a field removed or added, huge strings, 10k messages, deep nesting, unpaired tool calls
and results, unknown block types, bad base64, lone surrogates, NaN, Infinity and 1e400,
bad session headers. Every case's new user message carries ``NEWMSG<n>`` and every reply
of its upstream ``UPREPLY<n>`` or ``upcall_<n>``, so what a failed turn left behind can
be found in the store (the history a client sends before its tool results is marked
``ASKED<n>``: a new session imports it before the call, as the client's own input).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

from loci.testing import Fault, Reply

FACES = ("chat", "messages", "responses")
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages",
         "responses": "/v1/responses"}
#: The key the upstream is configured with: no piece of it may reach a client.
UPSTREAM_KEY = "sk-UPSTREAM-SECRET-a1b2c3d4e5f6g7h8"
#: A float written as 1e400 in the body (JSON readers take it as infinity).
_HUGE = 1234567.25
_TINY_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
             "AAAABJRU5ErkJggg==")


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": [value]}
    return value


HOSTILE: list[Any] = [None, True, False, 0, -1, 2 ** 70, 1.5, math.nan, math.inf, -math.inf,
                      _HUGE, "", " ", "x" * 70_000, "\ud800", "a\udfffb", "\x00", "NaN",
                      [], {}, [1, "a"], {"a": 1}, {"type": "nope"}, [{"type": "nope"}],
                      _deep(40), "💾" * 50]
UPSTREAM_BEHAVIOURS = ("text", "text", "text", "tags", "tools", "no_id", "no_name", "long",
                       "surrogate", "http500", "http401", "broken_json", "cut_stream",
                       "weird")


@dataclass
class Case:
    n: int
    face: str
    body: bytes
    headers: dict[str, str]
    stream: bool
    #: What the upstream does: one of ``UPSTREAM_BEHAVIOURS``.
    behaviour: str
    #: The upstream kind the request goes to: openai, anthropic, openai-responses.
    upstream: str
    mutations: list[str]

    @property
    def path(self) -> str:
        return PATHS[self.face]

    def describe(self) -> str:
        return (f"case {self.n}: {self.face} -> {self.upstream} stream={self.stream} "
                f"upstream={self.behaviour} mutations={self.mutations} "
                f"body={self.body[:300]!r}")


def reply(case: Case) -> Reply:
    """What the upstream answers to ``case`` when it answers at all."""
    n, kind = case.n, case.behaviour
    call = {"id": f"upcall_{n}", "type": "function",
            "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    if kind == "tags":
        return f"UPREPLY{n} sure [MEMORY:fact] likes tea [/MEMORY] done"
    if kind == "tools":
        return {"content": f"UPREPLY{n}", "tool_calls": [call]}
    if kind == "no_id":
        return [{**call, "id": ""}]
    if kind == "no_name":
        return [{**call, "function": {"name": "", "arguments": "{}"}}]
    if kind == "long":
        return f"UPREPLY{n} " + "word " * 13_000  # 65k characters
    if kind == "surrogate":
        return f"UPREPLY{n} broken \ud800 text"
    return f"UPREPLY{n} fine answer"


def fault(case: Case) -> Fault | None:
    """The broken answer the upstream gives ``case`` instead of a reply, if any."""
    n, kind = case.n, case.behaviour
    if kind == "http500":
        return Fault(500, b'{"error": {"message": "upstream exploded"}}')
    if kind == "http401":
        echo = "x" * 180 + UPSTREAM_KEY + " is not a valid key"
        return Fault(401, json.dumps({"error": {"message": echo}}).encode())
    if kind == "broken_json":
        return Fault(200, b'{"choices": [{"message": ')
    if kind == "cut_stream":
        return Fault(200, _cut_stream(case), "text/event-stream")
    if kind == "weird":
        return Fault(200, json.dumps(_weird(case.upstream, n)).encode())
    return None


def _cut_stream(case: Case) -> bytes:
    """The first events of a stream, and no end."""
    text = f"UPREPLY{case.n} partial"
    if case.upstream == "anthropic":
        events = [("message_start", {"type": "message_start", "message": {
                      "id": "m", "type": "message", "role": "assistant", "content": [],
                      "usage": {"input_tokens": 3, "output_tokens": 1}}}),
                  ("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}),
                  ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": text}})]
        return "".join(f"event: {k}\ndata: {json.dumps(d)}\n\n" for k, d in events).encode()
    if case.upstream == "openai-responses":
        event = {"type": "response.output_text.delta", "delta": text}
        return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": text},
                                     "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _weird(upstream: str, n: int) -> dict[str, Any]:
    """A 200 answer whose parts have the wrong types."""
    if upstream == "anthropic":
        return {"type": "message", "role": "assistant", "stop_reason": "tool_use",
                "content": [{"type": "tool_use", "id": 5, "name": None, "input": "x"},
                            {"type": "text", "text": 7}], "usage": {"input_tokens": "a"}}
    if upstream == "openai-responses":
        return {"id": "r", "status": "completed", "usage": [],
                "output": [{"type": "function_call", "call_id": None, "name": None},
                           {"type": "message", "content": "UPREPLY"}]}
    return {"id": 5, "choices": [{"index": 0, "finish_reason": 9, "message": {
        "role": "assistant", "content": 5, "tool_calls": [f"upcall_{n}"]}}],
        "usage": {"prompt_tokens": "many"}}


class Generator:
    """Cases from one seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def case(self, n: int) -> Case:
        rng = self.rng
        face = FACES[n % len(FACES)]
        stream = rng.random() < 0.5
        session = f"fz{n}"
        body = getattr(self, f"_{face}")(n, stream, session)
        headers = {"Content-Type": "application/json", "X-Loci-Session": session}
        mutations: list[str] = []
        for _ in range(rng.choice((0, 1, 1, 2))):
            mutations.append(self._mutate(body, headers, face))
        behaviour = rng.choice(UPSTREAM_BEHAVIOURS)
        upstream = rng.choice(("openai", "anthropic", "openai-responses"))
        text = json.dumps(body).replace(str(_HUGE), "1e400")
        return Case(n, face, text.encode("utf-8", "surrogatepass"), headers, stream,
                    behaviour, upstream, mutations)

    # -- valid requests ---------------------------------------------------------------

    def _tool(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": "lookup", "description": "Look up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}

    def _chat(self, n: int, stream: bool, session: str) -> dict[str, Any]:
        rng = self.rng
        messages: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            messages.append({"role": "system", "content": "Be brief."})
        if rng.random() < 0.3:
            messages += [{"role": "user", "content": "earlier question"},
                         {"role": "assistant", "content": "earlier answer"}]
        if rng.random() < 0.3:
            messages += [{"role": "user", "content": f"ASKED{n} look it up"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": f"cl{n}", "type": "function", "function": {
                                 "name": "lookup", "arguments": '{"q": "a"}'}}]},
                         {"role": "tool", "tool_call_id": f"cl{n}", "content": "found"}]
        else:
            content: Any = f"NEWMSG{n} hello"
            if rng.random() < 0.2:
                content = [{"type": "text", "text": f"NEWMSG{n} see"},
                           {"type": "image_url", "image_url": {
                               "url": f"data:image/png;base64,{_TINY_PNG}"}}]
            messages.append({"role": "user", "content": content})
        body: dict[str, Any] = {"model": "gpt-fuzz", "messages": messages, "stream": stream}
        if rng.random() < 0.5:
            body["temperature"] = rng.choice((0, 0.5, 1))
            body["max_tokens"] = rng.choice((16, 200))
        if rng.random() < 0.4:
            body["tools"] = [self._tool()]
            body["tool_choice"] = rng.choice(("auto", "required", "none"))
        if stream and rng.random() < 0.5:
            body["stream_options"] = {"include_usage": True}
        return body

    def _messages(self, n: int, stream: bool, session: str) -> dict[str, Any]:
        rng = self.rng
        messages: list[dict[str, Any]] = []
        if rng.random() < 0.3:
            messages += [{"role": "user", "content": "earlier question"},
                         {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}]
        if rng.random() < 0.3:
            messages += [{"role": "user", "content": f"ASKED{n} look it up"},
                         {"role": "assistant", "content": [
                             {"type": "tool_use", "id": f"cl{n}", "name": "lookup",
                              "input": {"q": "a"}}]},
                         {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": f"cl{n}",
                              "content": "found"}]}]
        else:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": f"NEWMSG{n} hello"}]
            if rng.random() < 0.2:
                blocks.append({"type": "image", "source": {
                    "type": "base64", "media_type": "image/png", "data": _TINY_PNG}})
            messages.append({"role": "user", "content": blocks if rng.random() < 0.5
                             else f"NEWMSG{n} hello"})
        body: dict[str, Any] = {"model": "claude-fuzz", "max_tokens": 256,
                                "messages": messages, "stream": stream}
        if rng.random() < 0.5:
            body["system"] = rng.choice(("Be brief.", [{"type": "text", "text": "Be brief.",
                                                        "cache_control": {
                                                            "type": "ephemeral"}}]))
        if rng.random() < 0.3:
            body["metadata"] = {"user_id": session}
        if rng.random() < 0.4:
            body["tools"] = [{"name": "lookup", "description": "Look up", "input_schema": {
                "type": "object", "properties": {"q": {"type": "string"}}}}]
            body["tool_choice"] = {"type": rng.choice(("auto", "any"))}
        if rng.random() < 0.3:
            body["temperature"] = 0.5
        return body

    def _responses(self, n: int, stream: bool, session: str) -> dict[str, Any]:
        rng = self.rng
        items: Any
        if rng.random() < 0.3:
            items = f"NEWMSG{n} hello"
        elif rng.random() < 0.3:
            items = [{"type": "message", "role": "user", "content": f"ASKED{n} look"},
                     {"type": "function_call", "call_id": f"cl{n}", "name": "lookup",
                      "arguments": '{"q": "a"}'},
                     {"type": "function_call_output", "call_id": f"cl{n}",
                      "output": "found"}]
        else:
            content: Any = [{"type": "input_text", "text": f"NEWMSG{n} hello"}]
            if rng.random() < 0.2:
                content.append({"type": "input_image",
                                "image_url": f"data:image/png;base64,{_TINY_PNG}"})
            items = [{"role": "user", "content": "earlier"},
                     {"role": "assistant", "content": "earlier answer"}
                     ] if rng.random() < 0.3 else []
            items.append({"type": "message", "role": "user", "content": content})
        body: dict[str, Any] = {"model": "gpt-fuzz", "input": items, "stream": stream}
        if rng.random() < 0.4:
            body["instructions"] = "Be brief."
        if rng.random() < 0.3:
            body["user"] = session
        if rng.random() < 0.4:
            body["tools"] = [{"type": "function", "name": "lookup", "parameters": {
                "type": "object", "properties": {"q": {"type": "string"}}}}]
        if rng.random() < 0.3:
            body["max_output_tokens"] = 100
        return body

    # -- mutations --------------------------------------------------------------------

    def _mutate(self, body: dict[str, Any], headers: dict[str, str], face: str) -> str:
        rng = self.rng
        # 10k messages are a costly case (a first turn's import and compaction): few.
        kind = rng.choice(("replace",) * 12 + ("remove",) * 3 + ("add",) * 3
                          + ("header", "unpair") * 3 + ("many",))
        if kind == "header":
            value = rng.choice(("", "a b", "a" * 300, "../x", "*", "é", "a/b", "\x7f"))
            headers["X-Loci-Session"] = value
            if not value:
                del headers["X-Loci-Session"]
            return f"header={value[:10]!r}"
        if kind == "many":
            key = "input" if face == "responses" else "messages"
            body[key] = [{"role": "user", "content": f"m{i}"} for i in range(10_000)]
            return "10k messages"
        if kind == "add":
            name, value = rng.choice((("messages", [{"role": "user", "content": "x"}]),
                                      ("input", "x"), ("user", 5), ("n", 3),
                                      ("stream", "yes"), ("temperature", math.nan),
                                      ("max_tokens", math.inf), ("top_p", _HUGE),
                                      ("extra", _deep(70)), ("metadata", {"user_id": 7}),
                                      ("system", "\ud800"), ("instructions", ["x"])))
            body[name] = value
            return f"add {name}"
        if kind == "unpair":
            key = "input" if face == "responses" else "messages"
            if isinstance(body.get(key), list) and body[key]:
                del body[key][rng.randrange(len(body[key]))]
            return f"unpair {key}"
        parent, key = self._spot(body)
        if kind == "remove":
            if isinstance(parent, dict):
                parent.pop(key, None)
            elif parent:
                parent.pop(key)
            return f"remove {key}"
        parent[key] = rng.choice(HOSTILE)
        return f"replace {key}={str(parent[key])[:20]!r}"

    def _spot(self, body: dict[str, Any]) -> tuple[Any, Any]:
        """A random (container, key) somewhere in ``body``."""
        rng = self.rng
        parent: Any = body
        key: Any = rng.choice(list(body))
        while rng.random() < 0.6:
            child = parent[key]
            if isinstance(child, dict) and child:
                parent, key = child, rng.choice(list(child))
            elif isinstance(child, list) and child:
                parent, key = child, rng.randrange(len(child))
            else:
                break
        return parent, key
