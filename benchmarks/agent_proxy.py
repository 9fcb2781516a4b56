"""Long agent sessions through the proxy: an agent that sends its whole message list on
every call, with the official ``openai`` client (Chat Completions) or, with ``--face
messages``, the official ``anthropic`` client (Messages: Claude Code's own API).

The same 23 sessions as ``agent_sessions.py``. The agent holds its own message list (its
system prompt, the task, every answer and tool result) and sends all of it on each call,
as mini-swe-agent does; Loci's server sits in between (in process, through the ASGI
app), records what is new, compiles the context and calls the upstream. The upstream is
the fake provider (``loci.testing.fake_provider``), answering each call with the session's
next recorded assistant message, tool calls included, and reporting the usage OpenAI's
prompt cache would. At 50%, 75% and 100% of the session the request the upstream
received is checked for the trail so far, exactly as ``agent_sessions.py`` checks a
compiled context, with the same recency baselines.

Prompt cache and cost, in the same run: the same agent without Loci sends the same
message list straight to a second fake provider (as if its model's window held it all);
both priced as gpt-4.1, and the whole list uncached beside them.

    python benchmarks/agent_proxy.py --data ../shared/data/agent_sessions --json
    python benchmarks/agent_proxy.py --data ../shared/data/claude_code_sessions \
        --face messages --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from anthropic import Anthropic
from fastapi.testclient import TestClient
from openai import OpenAI

from agent_sessions import from_anthropic, load
from common import machine
from loci import Usage, load_settings
from loci.apis.wire import read_usage
from loci.evaluation.replay import CONTINUE, CUTS, Tally, model_call
from loci.evaluation.trail import (
    CLASSES,
    broken_pairs,
    context_text,
    squash,
    tail,
    trail_of,
    transcript_lines,
)
from loci.pricing import price_of
from loci.server import create_app
from loci.testing import FakeProvider
from loci.tokens import token_counter

BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}


BASH_TOOL = {"name": "bash", "description": "Run a shell command.",
             "input_schema": BASH["function"]["parameters"]}


class ChatAgent:
    """An agent on Chat Completions: sends its list as it is."""

    provider = "openai"

    def __init__(self, http: Any, upstream: str) -> None:
        self.client = OpenAI(base_url="http://127.0.0.1/v1", api_key="open", http_client=http,
                             max_retries=0)
        self.direct = OpenAI(base_url=f"{upstream}/v1", api_key="sk-fake", max_retries=0)

    def call(self, direct: bool, model: str, sent: list[dict[str, Any]], name: str) -> Usage:
        client = self.direct if direct else self.client
        headers = {} if direct else {"X-Loci-Session": name, "X-Loci-User": name}
        answer = client.chat.completions.create(
            model=model, messages=sent, tools=[BASH],  # type: ignore[arg-type]
            extra_headers=headers)
        return read_usage(answer.usage)

    @staticmethod
    def received(body: dict[str, Any]) -> list[dict[str, Any]]:
        """The upstream request as chat messages, without the agent's own system prompt
        (not Loci's doing: left out of what is measured)."""
        messages = list(body["messages"])
        return messages[1:] if messages and messages[0]["role"] == "system" else messages


class MessagesAgent:
    """An agent on Anthropic's Messages API (as Claude Code is): its list in content
    blocks, tool results in user turns."""

    provider = "anthropic"

    def __init__(self, http: Any, upstream: str) -> None:
        self.claude = Anthropic(base_url="http://127.0.0.1", api_key="open", http_client=http,
                                max_retries=0)
        self.direct_claude = Anthropic(base_url=upstream, api_key="sk-fake", max_retries=0)

    def call(self, direct: bool, model: str, sent: list[dict[str, Any]], name: str) -> Usage:
        client = self.direct_claude if direct else self.claude
        headers = {} if direct else {"X-Loci-Session": name, "X-Loci-User": name}
        own = [m for m in sent if m["role"] == "system"]
        extra = {"system": str(own[0]["content"])} if own else {}
        answer = client.messages.create(
            model=model, max_tokens=1024, tools=[BASH_TOOL],  # type: ignore[list-item]
            messages=to_anthropic([m for m in sent if m["role"] != "system"]),  # type: ignore[arg-type]
            extra_headers=headers, **extra)
        return read_usage(answer.usage)

    @staticmethod
    def received(body: dict[str, Any]) -> list[dict[str, Any]]:
        """Loci's system blocks (the agent's own prompt, if any, among them: these
        sessions have none) and the messages, as chat messages."""
        system = body.get("system") or []
        text = system if isinstance(system, str) else "\n".join(
            str(b.get("text") or "") for b in system)
        return [{"role": "system", "content": text}, *from_anthropic(body["messages"])]


def to_anthropic(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as a Messages list: tool calls as ``tool_use`` blocks, the results
    that follow a call as one user turn of ``tool_result`` blocks. A call the log holds
    no result for (an interrupted parallel call) gets the error result the client must
    have sent, or the API would refuse the list."""
    out = _as_blocks(messages)
    for number, message in enumerate(out):
        calls = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        after = out[number + 1] if number + 1 < len(out) else None
        if not calls or after is None:
            continue
        if after["role"] != "user":
            after = {"role": "user", "content": []}
            out.insert(number + 1, after)
        answered = {b.get("tool_use_id") for b in after["content"]}
        after["content"][:0] = [{"type": "tool_result", "tool_use_id": c, "is_error": True,
                                 "content": "(no result was recorded)"}
                                for c in calls if c not in answered]
    return out


def _as_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                     "content": str(message.get("content") or "") or "(no output)"}
            if out and out[-1]["role"] == "user" and out[-1]["content"][-1]["type"] == (
                    "tool_result"):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        text = str(message.get("content") or "")
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text.strip() else []
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                    "input": json.loads(c["function"].get("arguments") or "{}")}
                   for c in message.get("tool_calls") or ()]
        role = "user" if message["role"] == "user" else "assistant"
        if out and out[-1]["role"] == role:  # Messages alternates roles
            out[-1]["content"] += blocks or [{"type": "text", "text": "(empty)"}]
        else:
            out.append({"role": role, "content": blocks or [{"type": "text",
                                                             "text": "(empty)"}]})
    return out


FACES = {"chat": ChatAgent, "messages": MessagesAgent}


def run(sessions: list[tuple[str, list[dict[str, Any]]]], window: int, home: Path,
        face: str = "chat") -> dict[str, Any]:
    model = f"agent-{window // 1000}k"
    replies: list[dict[str, Any]] = []
    upstream = FakeProvider(reply=lambda body: replies[0]).__enter__()
    naive = FakeProvider(reply=lambda body: replies.pop(0)).__enter__()
    settings = load_settings(home=str(home), store=f"sqlite:///{home}/proxy-{window}.db",
                             model=model, models={model: window}, memory_mirror=False,
                             workspace=str(home), proxy_provider=FACES[face].provider,
                             proxy_base_url=f"{upstream.url}/v1", proxy_api_key="sk-fake")
    counter = token_counter(model)
    tally = {name: Tally() for name in ("loci", "tail_at_loci_tokens", "whole")}
    figures: dict[str, list[float]] = defaultdict(list)
    calls_ms: list[float] = []
    spent: dict[str, list[Usage]] = {"loci": [], "naive": []}
    broken = empty = requests = 0
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as http:
        agent = FACES[face](http, naive.url)
        for name, messages in sessions:
            trail = trail_of(messages)
            task = next(str(m["content"]) for m in messages if m["role"] == "user")
            cuts = {model_call(messages, int(len(messages) * c)): c for c in CUTS}
            sent: list[dict[str, Any]] = []
            # One more call after the last result: the end of the session.
            ending = {"role": "assistant", "content": "(the recorded session ends here)"}
            for index, message in enumerate([*messages, ending]):
                if message["role"] != "assistant":
                    sent.append(message)
                    continue
                if sent and sent[-1]["role"] == "assistant":
                    # Two answers in a row (a log's split record, or the end of a
                    # session): the API wants a user turn between them.
                    sent.append({"role": "user", "content": CONTINUE})
                replies.append(message)
                started = time.perf_counter()
                spent["loci"].append(agent.call(False, model, sent, name))
                calls_ms.append((time.perf_counter() - started) * 1000)
                spent["naive"].append(agent.call(True, model, sent, name))
                request = agent.received(upstream.requests[-1]["body"])
                history = [m for m in request if m["role"] != "system"]
                broken += broken_pairs(history)
                # Empty: nothing but the newest message, though the agent sent more.
                empty += len(history) <= 1 < sum(m["role"] != "system" for m in sent)
                requests += 1
                if index in cuts:
                    measure(request, trail, index, transcript_lines(messages[:index]), task,
                            tally, figures, counter, cuts[index])
                sent.append({k: v for k, v in message.items() if k in
                             ("role", "content", "tool_calls")})
    upstream.__exit__(None, None, None)
    naive.__exit__(None, None, None)
    report: dict[str, Any] = {"window": window, "face": face, **cache_figures(spent)}
    for cut in CUTS:
        for key in (*CLASSES, "all"):
            for label, t in tally.items():
                report[f"{cut}|{key}|{label}"] = t.share(f"{cut}|{key}")
        report[f"{cut}|task"] = round(statistics.mean(figures[f"{cut}|task"]), 3)
        report[f"{cut}|tokens_mean"] = round(statistics.mean(figures[f"{cut}|tokens"]))
    report.update(call_p50_ms=round(statistics.median(calls_ms), 2), requests=requests,
                  empty_histories=empty, broken_pairs=broken)
    return report


def cache_figures(spent: dict[str, list[Usage]]) -> dict[str, Any]:
    """Cache-hit rate over input tokens and cost (gpt-4.1 prices) of each client, and
    the naive client's list sent uncached."""
    price = price_of("gpt-4.1")
    assert price is not None
    figures: dict[str, Any] = {}
    for client, usages in spent.items():
        total = sum(usages, Usage())
        figures[f"{client}_input_tokens"] = total.input_tokens
        figures[f"{client}_hit_rate"] = round(total.cached_tokens / total.input_tokens, 4)
        figures[f"{client}_cost"] = round(sum(price.cost(u) for u in usages), 2)
    total = sum(spent["naive"], Usage())
    figures["uncached_cost"] = round(price.uncached_cost(total.input_tokens,
                                                         total.output_tokens), 2)
    return figures


def measure(request: list[dict[str, Any]], trail: Any, position: int, lines: list[str],
            task: str, tally: dict[str, Tally], figures: dict[str, list[float]],
            counter: Any, cut: float) -> None:
    text = context_text(request)
    tokens = sum(counter.count_message(m["role"], str(m.get("content") or "")) +
                 counter.count(json.dumps(m.get("tool_calls") or "")) for m in request)
    haystacks = {"loci": text, "tail_at_loci_tokens": squash(tail(lines, tokens, counter.count)),
                 "whole": squash("\n".join(lines))}
    for artifact in trail.upto(position):
        for label, haystack in haystacks.items():
            held = artifact.key in haystack
            tally[label].add(f"{cut}|{artifact.kind}", held)
            tally[label].add(f"{cut}|all", held)
    figures[f"{cut}|task"].append(float(squash(task)[:100] in text))
    figures[f"{cut}|tokens"].append(tokens)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/agent_sessions"))
    parser.add_argument("--windows", default="16000,32000")
    parser.add_argument("--sessions", default="", help="comma-separated names (default: all)")
    parser.add_argument("--json", action="store_true", help="print one JSON line per window")
    parser.add_argument("--face", choices=sorted(FACES), default="chat",
                        help="the API the agent speaks (default: chat)")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    if not data.is_dir():
        print(f"no such directory: {data}", file=sys.stderr)
        return 2
    sessions = load(data, [s for s in args.sessions.split(",") if s])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loci-agent-proxy-") as tmp:
        os.chdir(tmp)
        for window in (int(w) for w in args.windows.split(",")):
            report = run(sessions, window, Path(tmp), args.face)
            if args.json:
                print(json.dumps(report))
                continue
            print(f"\n== window {window:,}: {report['requests']} calls, empty histories "
                  f"{report['empty_histories']}, broken pairs {report['broken_pairs']}, "
                  f"call p50 {report['call_p50_ms']} ms")
            print("   cache hits / cost: Loci {loci_hit_rate} / ${loci_cost}, naive "
                  "{naive_hit_rate} / ${naive_cost}, naive uncached ${uncached_cost}"
                  .format(**report))
            for cut in CUTS:
                row = " ".join(f"{k} {report[f'{cut}|{k}|loci']}" for k in (*CLASSES, "all"))
                print(f"{cut:>5} {row}; tail at Loci's tokens "
                      f"{report[f'{cut}|all|tail_at_loci_tokens']}; task "
                      f"{report[f'{cut}|task']}; tokens {report[f'{cut}|tokens_mean']:,}")
    print(f"{len(sessions)} sessions, {round(time.perf_counter() - started)} s, {machine()}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
