"""A long answer streamed through the proxy against the same answer unstreamed (issue
#48, item 2): the streaming tag filter's cost, and the whole request's.

Usage: python benchmarks/proxy_stream.py [--sizes 65536,1048576] [--budget 120]
[--repeat 3] [--padded] [--json]

Two parts, before and after in the same run:

- **filter**: the reply fed to the tag filter in 4-character deltas (as the package's
  fake provider streams it), by the filter the proxy had (the whole reply re-parsed on
  every delta, kept here as ``QuadraticFilter``) and by ``proxy_stream.TagFilter``,
  against parsing the reply once (what the unstreamed answer costs). The quadratic
  filter stops at ``--budget`` seconds; its figure is then the time projected from the
  characters it got through (cost grows with the square of the length).
- **proxy**: ``POST /v1/chat/completions`` through the real app served by uvicorn on
  loopback, streamed and not. The upstream runs in a process of its own (a real
  provider is never in the server's process) and answers bytes it encoded before the
  clock starts (a ``Fault`` of ``loci.testing``'s fake provider: bytes as they are):
  the fake provider's answer (``fake_answers.openai_events``, one event
  per 4 characters, 262k events for 1 MB), written as fast as the socket takes it, so
  the proxy's own cost is what is timed. "before" swaps in the quadratic filter and
  Starlette's own iteration of the event stream (a thread hop per event), as the proxy
  had them; only for sizes the budget allows. Beside them, the upstream's stream read
  and parsed event by event directly (no proxy).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.server.conftest import serving

from common import machine
from loci import exchange, load_settings
from loci.llm._http import parse_sse
from loci.memory.stream import TagFilter
from loci.memory.tags import parse_reply
from loci.server import create_app, proxy_turn
from loci.testing import FakeProvider, Fault
from loci.testing.fake_answers import openai_completion, openai_events

_OPEN = re.compile(r"\[\s*(memory|state)\s*:[^\]\n]*\]", re.IGNORECASE)
_CLOSE = {"memory": re.compile(r"\[\s*/\s*memory\s*\]", re.IGNORECASE),
          "state": re.compile(r"\[\s*/\s*state\s*\]", re.IGNORECASE)}


class QuadraticFilter:
    """The filter as the proxy had it: the whole reply re-parsed on every delta."""

    def __init__(self) -> None:
        self.raw, self.sent = "", ""

    def feed(self, text: str) -> str:
        self.raw += text
        return self.finish(parse_reply(self.raw[: self._safe_end()]).clean)

    def finish(self, clean: str) -> str:
        if not clean.startswith(self.sent):
            return ""
        new, self.sent = clean[len(self.sent):], clean
        return new

    def _safe_end(self) -> int:
        raw, end = self.raw, len(self.raw)
        last_open = raw.rfind("[")
        if last_open != -1 and "]" not in raw[last_open:]:
            end = last_open
        for match in _OPEN.finditer(raw, 0, end):
            if not _CLOSE[match.group(1).lower()].search(raw, match.end()):
                end = match.start()
                break
        while end and raw[end - 1].isspace():
            end -= 1
        return end


def reply(size: int) -> str:
    """Prose of ``size`` characters, a paragraph break every ~600, a memory tag early."""
    line = "The answer holds words, numbers like 42 and [brackets] here and there. " * 8
    text = "Sure. [MEMORY:fact] likes long answers [/MEMORY] Here it is.\n\n"
    while len(text) < size:
        text += line + "\n\n"
    return text[:size]


def filter_seconds(make: type[Any], text: str, budget: float) -> tuple[float, bool]:
    """(seconds for the whole reply, whether it was projected from a part)."""
    tags = make()
    began = time.perf_counter()
    for i in range(0, len(text), 4):
        tags.feed(text[i:i + 4])
        took = time.perf_counter() - began
        if took > budget:
            return took * (len(text) / (i + 4)) ** 2, True
    tags.finish(parse_reply(text).clean)
    return time.perf_counter() - began, False


def padded(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events as OpenAI streams them by default: each delta padded with random
    characters of varying length (``obfuscation``)."""
    pad = random.Random(5)
    return [{**event, "obfuscation": "".join(pad.choices("abcdefXYZ019", k=pad.randint(0, 12)))}
            if event.get("choices") else event for event in events]


def _replay(text: str, port: multiprocessing.SimpleQueue[int], pad: bool = False) -> None:
    """Serve ``text`` as the fake provider answers it, streamed or not, from bytes
    encoded once (the upstream's process); with ``pad``, as OpenAI pads its events."""
    usage = {"prompt_tokens": 10, "completion_tokens": len(text) // 4,
             "total_tokens": 10 + len(text) // 4}
    events = openai_events(text, usage)
    streamed = b"".join(f"data: {json.dumps(event)}\n\n".encode()
                        for event in (padded(events) if pad else events)) + b"data: [DONE]\n\n"
    whole = json.dumps(openai_completion(text, usage)).encode()

    answers = {True: Fault(200, streamed, "text/event-stream"), False: Fault(200, whole)}
    with FakeProvider(fault=lambda request: answers[bool(request["body"].get("stream"))],
                      keep_requests=False) as provider:
        port.put(int(provider.url.rsplit(":", 1)[1]))
        threading.Event().wait()


@contextmanager
def replaying(text: str, pad: bool = False) -> Iterator[str]:
    """The base URL of an upstream answering ``text`` from a process of its own."""
    spawn = multiprocessing.get_context("spawn")
    port: multiprocessing.SimpleQueue[int] = spawn.SimpleQueue()
    process = spawn.Process(target=_replay, args=(text, port, pad), daemon=True)
    process.start()
    try:
        yield f"http://127.0.0.1:{port.get()}"
    finally:
        process.kill()
        process.join()


def proxy_seconds(upstream: str, stream: bool, before: bool) -> float:
    home = Path(tempfile.mkdtemp())
    saved = exchange.TagFilter, proxy_turn.batched
    if before:
        exchange.TagFilter = QuadraticFilter  # type: ignore[assignment,misc]
        proxy_turn.batched = lambda events: events  # type: ignore[assignment,return-value]
    try:
        app = create_app(load_settings(
            store=f"sqlite:///{home / 'b.db'}", home=str(home), workspace=str(home),
            embedding_provider="hash", proxy_provider="openai", proxy_api_key="k",
            proxy_base_url=f"{upstream}/v1", models={"bench": 128_000}), serving=True)
        with serving(app) as base:
            began = time.perf_counter()
            answer = httpx.post(f"{base}/v1/chat/completions", timeout=3600, json={
                "model": "bench", "stream": stream,
                "messages": [{"role": "user", "content": "write at length"}]},
                headers={"X-Loci-Session": "bench"})
            took = time.perf_counter() - began
            assert answer.status_code == 200 and ("[DONE]" in answer.text[-20:]
                                                  or not stream), answer.text[-300:]
            return took
    finally:
        exchange.TagFilter, proxy_turn.batched = saved  # type: ignore[misc]


def upstream_seconds(upstream: str) -> float:
    """The upstream's stream read and parsed event by event, without the proxy."""
    with httpx.Client(timeout=3600) as c:
        began = time.perf_counter()
        with c.stream("POST", f"{upstream}/v1/chat/completions", json={
                "model": "bench", "stream": True,
                "messages": [{"role": "user", "content": "x"}]}) as answer:
            for event in parse_sse(answer.iter_lines()):
                if event.data != "[DONE]":
                    json.loads(event.data)
        return time.perf_counter() - began


def run(sizes: list[int], budget: float, repeat: int, pad: bool = False) -> dict[str, Any]:
    rounds = range(repeat)
    rows: dict[str, Any] = {"machine": machine(), "filter": [], "proxy": []}
    for size in sizes:
        text = reply(size)
        began = time.perf_counter()
        parse_reply(text)
        once = time.perf_counter() - began
        old, projected = filter_seconds(QuadraticFilter, text, budget)
        new, _ = filter_seconds(TagFilter, text, budget * 10)
        rows["filter"].append({"chars": size, "parse_once_s": once, "before_s": old,
                               "before_projected": projected, "after_s": new})
        with replaying(text, pad) as upstream:
            row: dict[str, Any] = {
                "chars": size,
                "unstreamed_s": median(proxy_seconds(upstream, False, False) for _ in rounds),
                "streamed_s": median(proxy_seconds(upstream, True, False) for _ in rounds),
                "upstream_stream_s": median(upstream_seconds(upstream) for _ in rounds)}
            if not projected and old < budget / 4:
                row["streamed_before_s"] = proxy_seconds(upstream, True, True)
        rows["proxy"].append(row)
    return rows


def report(rows: dict[str, Any]) -> None:
    print(f"machine: {rows['machine']}")
    print("filter, 4-character deltas | parse once | before (quadratic) | after (linear)")
    for r in rows["filter"]:
        mark = " (projected)" if r["before_projected"] else ""
        print(f"  {r['chars']:>9,} chars | {r['parse_once_s']:.3f} s | "
              f"{r['before_s']:.1f} s{mark} | {r['after_s']:.2f} s")
    print("proxy | unstreamed | streamed after | streamed before | upstream's stream "
          "alone | after / unstreamed | after / upstream's stream")
    for r in rows["proxy"]:
        before = f"{r['streamed_before_s']:.2f} s" if "streamed_before_s" in r else "-"
        print(f"  {r['chars']:>9,} chars | {r['unstreamed_s']:.2f} s | "
              f"{r['streamed_s']:.2f} s | {before} | {r['upstream_stream_s']:.2f} s | "
              f"{r['streamed_s'] / r['unstreamed_s']:.1f}x | "
              f"{r['streamed_s'] / r['upstream_stream_s']:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="65536,1048576")
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--repeat", type=int, default=3,
                        help="requests of each kind; their median is shown")
    parser.add_argument("--padded", action="store_true",
                        help="the upstream pads each event as OpenAI does by default")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run([int(s) for s in args.sizes.split(",")], args.budget, args.repeat,
               args.padded)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        report(rows)


if __name__ == "__main__":
    main()
