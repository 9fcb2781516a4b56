"""The proxy fuzzer: seeded hostile requests to ``/v1/chat/completions``,
``/v1/messages`` and ``/v1/responses`` (``proxy_fuzz_cases``), served by uvicorn, with the
package's fake provider as the upstream on loopback, answering well or badly (errors,
broken JSON, cut streams, tool calls without an id or a name, 64k replies, lone
surrogates, fields of the wrong type).

Every case must get: no 500 and no traceback in the server's log; an error in its face's
own shape, which never shows a piece of the upstream key; a stream that ends with its
API's end or error event; an answer within 5 s; and when the turn failed, nothing of it
stored: no usage row, no event holding its new message, its upstream's reply or calls.
(The client's own input is recorded before the call, as ``loci.turns`` says: a new
session's imported history and the results of tool calls, each call's once; the
compiled context shows them.)

The CI run takes ``PROXY_FUZZ_CASES`` cases (default 150, about a minute); the full run
(issue 47's target: at least 1,500 cases) is

    PROXY_FUZZ_CASES=1500 PROXY_FUZZ_SLOW=5 pytest tests/server/test_proxy_fuzz.py -q -s

``PROXY_FUZZ_SEED`` picks another (repeatable) set of cases.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loci import load_settings
from loci.server import create_app
from loci.testing import FakeProvider
from tests.server.conftest import serving
from tests.server.proxy_fuzz_cases import UPSTREAM_KEY, Case, Generator, fault, reply

CASES = int(os.environ.get("PROXY_FUZZ_CASES", "150"))
SEED = int(os.environ.get("PROXY_FUZZ_SEED", "47"))
#: No request may take longer against an upstream that answers at once (the issue's
#: target is 5 s, checked with PROXY_FUZZ_SLOW=5 in the documented run; CI shares a
#: loaded 2-core machine, so its default only catches hangs).
SLOW_SECONDS = float(os.environ.get("PROXY_FUZZ_SLOW", "15"))
_ENDS = {"chat": "[DONE]", "messages": "message_stop", "responses": "response.completed"}


class Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Proxy:
    """Three servers, one per upstream kind, over one fake provider and one store."""

    def __init__(self, home: Path, provider: FakeProvider) -> None:
        self.db = home / "fuzz.db"
        self.current: Case | None = None
        self.apps = {kind: create_app(load_settings(
            store=f"sqlite:///{self.db}", home=str(home), workspace=str(home),
            embedding_provider="hash", proxy_provider=kind,
            models={"gpt-fuzz": 128_000, "claude-fuzz": 200_000}, proxy_api_key=UPSTREAM_KEY,
            proxy_base_url=f"{provider.url}/v1")) for kind in
            ("openai", "anthropic", "openai-responses")}
        self.urls: dict[str, str] = {}

    def stored(self) -> tuple[int, int]:
        """(the last event's id, the usage rows)."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as db:
            last = db.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]
            usage = db.execute("SELECT count(*) FROM usage").fetchone()[0]
        return int(last), int(usage)

    def left_behind(self, case: Case, after: int) -> list[tuple[Any, ...]]:
        """The events newer than ``after`` that the failed ``case`` should not have left:
        its new message, its upstream's reply or calls."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT type, role, content, tool_call_id FROM events "
                              "WHERE id > ?", (after,)).fetchall()
        marks = (f"NEWMSG{case.n} ", f"UPREPLY{case.n}", f"upcall_{case.n}")
        return [row for row in rows
                if any(mark in str(row[2]) or mark in str(row[3]) for mark in marks)]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    home = tmp_path_factory.mktemp("proxy-fuzz")
    state: dict[str, Proxy] = {}

    def current() -> Case:
        case = state["proxy"].current
        assert case is not None
        return case

    with FakeProvider(reply=lambda body: reply(current()),
                      fault=lambda request: fault(current())) as provider:
        state["proxy"] = running = Proxy(home, provider)
        with serving(running.apps["openai"]) as a, serving(running.apps["anthropic"]) as b, \
                serving(running.apps["openai-responses"]) as c:
            running.urls = {"openai": a, "anthropic": b, "openai-responses": c}
            yield running


def send(client: httpx.Client, url: str, case: Case) -> tuple[int, bool, str, bool]:
    """(status, whether it is an event stream, body text, whether it arrived whole)."""
    try:
        headers = {name: value.encode() for name, value in case.headers.items()}
        with client.stream("POST", url + case.path, content=case.body,
                           headers=headers) as answer:
            text = b"".join(answer.iter_bytes()).decode("utf-8", "replace")
            events = "event-stream" in answer.headers.get("content-type", "")
            return answer.status_code, events, text, True
    except httpx.HTTPError as exc:
        return 0, False, f"{type(exc).__name__}: {exc}", False


def stream_outcome(face: str, text: str) -> str:
    """"done", "error" (the API's error event, last) or "broken"."""
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    if not events:
        return "broken"
    last = events[-1]
    if face == "chat":
        if last == "[DONE]":
            return "done"
        return "error" if "error" in json.loads(last) else "broken"
    kind = json.loads(last).get("type")
    return "done" if kind == _ENDS[face] else "error" if kind == "error" else "broken"


def error_shape(face: str, text: str) -> bool:
    try:
        body = json.loads(text)
    except ValueError:
        return False
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return False
    return face != "messages" or (body.get("type") == "error"
                                  and isinstance(error.get("type"), str))


def leaks_key(text: str) -> bool:
    return any(UPSTREAM_KEY[i:i + 8] in text for i in range(len(UPSTREAM_KEY) - 7))


def check(proxy: Proxy, case: Case, client: httpx.Client, problems: Counter[str],
          examples: dict[str, str]) -> tuple[int, float]:
    """Send ``case`` and count what went wrong; (its status, its seconds)."""
    def problem(kind: str, detail: str = "") -> None:
        problems[kind] += 1
        examples.setdefault(kind, f"{case.describe()} -> {detail[:300]}")

    before_event, before_usage = proxy.stored()
    proxy.current = case
    began = time.perf_counter()
    status, events, text, whole = send(client, proxy.urls[case.upstream], case)
    took = time.perf_counter() - began
    if took > SLOW_SECONDS:
        problem("slow", f"{took:.1f}s")
    if status >= 500 and status not in (502, 503, 504):
        problem(f"http {status}", text)
    if leaks_key(text):
        problem("key shown", text)
    failed = not whole or status >= 400
    if not whole:
        problem("broken stream", text)
    elif status >= 400 and not error_shape(case.face, text) and not (
            status == 400 and text == "Invalid HTTP request received."):  # uvicorn's parser
        problem("error shape", text)
    elif events:
        outcome = stream_outcome(case.face, text)
        if outcome == "broken":
            problem("broken stream", text[-300:])
        failed = outcome in ("broken", "error")
    if failed:
        _, after_usage = proxy.stored()
        if after_usage != before_usage:
            problem("usage stored on failure", f"{status} {text}")
        if left := proxy.left_behind(case, before_event):
            problem("events stored on failure", f"{status} {text[:200]} {left[:2]}")
    return status, took


def test_the_proxy_holds(proxy: Proxy) -> None:
    generator = Generator(SEED)
    problems: Counter[str] = Counter()
    examples: dict[str, str] = {}
    catcher = Tracebacks()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn"),
               logging.getLogger("uvicorn.error")]
    for logger in loggers:
        logger.addHandler(catcher)
    statuses: Counter[str] = Counter()
    slowest = (0.0, -1)
    started = time.perf_counter()
    try:
        # A connection per case: the server closes one after an invalid request, and a
        # kept one could be reused before its close arrives (a loaded machine's race,
        # "Server disconnected without sending a response", not the server's fault).
        with httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0)
                          ) as client:
            for n in range(CASES):
                case = generator.case(n)
                seen = len(catcher.records)
                status, took = check(proxy, case, client, problems, examples)
                statuses[f"{case.face} {status}"] += 1
                slowest = max(slowest, (took, case.n))
                if len(catcher.records) > seen:
                    problems["traceback"] += len(catcher.records) - seen
                    record = catcher.records[seen]
                    examples.setdefault("traceback", f"{case.describe()} -> "
                                        f"{record.getMessage()} {record.exc_info!r}"[:600])
    finally:
        for logger in loggers:
            logger.removeHandler(catcher)
    took = time.perf_counter() - started
    summary = (f"proxy fuzz: {CASES} cases (seed {SEED}) in {took:.0f}s; problems: "
               f"{dict(problems) or 'none'}")
    print(f"\n{summary}\n  slowest: {slowest[0]:.2f}s (case {slowest[1]}); answers: "
          f"{dict(sorted(statuses.items()))}")
    for kind, example in examples.items():
        print(f"  {kind}: {example}")
    assert not problems, summary + "\n" + "\n".join(f"{k}: {v}" for k, v in examples.items())
