"""Prompt-cache hits and cost through the proxy, against the providers' published caching
rules (``loci.llm.fake_provider``), beside a naive client in the same run.

An agent conversation of ``turns`` user turns (a 1.6k-token system prompt; a tool call
with a 300-token result every third turn; a memory tag every 25th reply; compaction for a
32k-token window) is driven twice per style, with the same replies:

- **Loci**: the client sends its whole message list through Loci's proxy (Chat
  Completions to an OpenAI-style upstream; Messages, its system prompt marked with
  ``cache_control``, to an Anthropic-style upstream), which records each call in the
  usage ledger;
- **naive**: the same client sends the same list straight to the same kind of upstream
  (for Anthropic with a breakpoint on its last message, as the provider's guide
  advises): the whole history every time, cached by the provider.

Reported per style: the cache-hit rate over input tokens, input tokens, cost under the
price table; the counterfactual of issue #21 (the whole history, uncached) from the
ledger. The upstream's clock advances 30 simulated seconds per call.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import sentence
from loci import Usage, load_settings
from loci.llm.fake_provider import FakeProvider, Reply
from loci.llm.wire import read_usage
from loci.models import Scope
from loci.pricing import price_of
from loci.server import create_app
from loci.server.hub import Principal

MODELS = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-6"}
SYSTEM = "You are a coding agent working in a large repository. " + " ".join(
    f"Guideline {n}: keep the change small, run the tests of module {n}, and report the "
    "files you changed with one line each." for n in range(60))
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the repository.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                   "required": ["q"]}}}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def script(turns: int, rng: random.Random) -> list[tuple[str, list[Reply], list[str]]]:
    """Per turn: the user's message, the upstream's replies in order, the tool results."""
    plan = []
    for n in range(turns):
        message = f"Turn {n}: {sentence(rng, 14)}?"
        tag = f" [MEMORY:project_context] fact {n}: {sentence(rng, 8)} [/MEMORY]" if (
            n % 25 == 0) else ""
        answer = f"Answer {n}: {sentence(rng, 30)}.{tag}"
        if n % 3:
            plan.append((message, [answer], []))
            continue
        call = [{"id": f"call_{n}", "type": "function", "function": {
            "name": "search", "arguments": json.dumps({"q": message[:40]})}}]
        result = "\n".join(sentence(rng, 20) for _ in range(12))
        plan.append((message, [call, answer], [result]))
    return plan


def run_openai(plan: list[Any], base: str, http: Any, clock: Clock) -> list[Usage]:
    """The client's calls in the Chat Completions shape; the usages it was told."""
    from openai import OpenAI
    client = OpenAI(base_url=f"{base}/v1", api_key="open", max_retries=0,
                    **({"http_client": http} if http else {}))
    sent: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    usages = []
    for message, replies, results in plan:
        sent.append({"role": "user", "content": message})
        for _ in replies:
            clock.now += 30
            answer = client.chat.completions.create(
                model=MODELS["openai"], messages=sent, tools=[SEARCH],  # type: ignore[arg-type]
                extra_headers={"X-Loci-Session": "agent"})
            usages.append(read_usage(answer.usage))
            choice = answer.choices[0].message
            if choice.tool_calls:
                sent.append({"role": "assistant", "content": None, "tool_calls": [
                    c.model_dump() for c in choice.tool_calls]})
                sent += [{"role": "tool", "tool_call_id": c.id, "content": r}
                         for c, r in zip(choice.tool_calls, results, strict=True)]
            else:
                sent.append({"role": "assistant", "content": choice.content or ""})
    return usages


def run_anthropic(plan: list[Any], base: str, http: Any, clock: Clock) -> list[Usage]:
    """The client's calls in the Messages shape; the usages it was told."""
    from anthropic import Anthropic
    client = Anthropic(base_url=base, api_key="open", max_retries=0,
                       **({"http_client": http} if http else {}))
    sent: list[dict[str, Any]] = []
    usages = []
    tool = {"name": "search", "description": "Search the repository.",
            "input_schema": SEARCH["function"]["parameters"]}
    for message, replies, results in plan:
        sent.append({"role": "user", "content": [{"type": "text", "text": message}]})
        for _ in replies:
            clock.now += 30
            marked = [*sent[:-1], {**sent[-1], "content": [
                *sent[-1]["content"][:-1],
                {**sent[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}]}]
            answer = client.messages.create(
                model=MODELS["anthropic"], max_tokens=1024, tools=[tool],  # type: ignore[list-item]
                system=[{"type": "text", "text": SYSTEM,
                         "cache_control": {"type": "ephemeral"}}],
                messages=marked, extra_headers={"X-Loci-Session": "agent"})  # type: ignore[arg-type]
            usages.append(read_usage(answer.usage))
            blocks = [b.model_dump(exclude_none=True) for b in answer.content]
            sent.append({"role": "assistant", "content": blocks})
            uses = [b for b in blocks if b["type"] == "tool_use"]
            if uses:
                sent.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": b["id"], "content": r}
                    for b, r in zip(uses, results, strict=True)]})
    return usages


def replies_of(plan: list[Any]) -> list[Reply]:
    return [reply for _, replies, _ in plan for reply in replies]


def drive(style: str, plan: list[Any], home: Path) -> dict[str, Any]:
    model = MODELS[style]
    run = run_openai if style == "openai" else run_anthropic
    figures: dict[str, Any] = {}
    for client in ("loci", "naive"):
        clock, queue = Clock(), replies_of(plan)
        with FakeProvider(reply=lambda body, queue=queue: queue.pop(0),  # type: ignore[misc]
                          clock=clock) as provider:
            if client == "naive":
                usages = run(plan, provider.url, None, clock)
                figures[client] = priced(model, usages)
                continue
            settings = load_settings(
                home=str(home), store=f"sqlite:///{home}/{style}.db", model=model,
                models={model: 32_000}, memory_mirror=False, workspace=str(home),
                embedding_provider="hash", proxy_provider=style,
                proxy_base_url=f"{provider.url}/v1", proxy_api_key="sk-fake")
            app = create_app(settings)
            with TestClient(app, base_url="http://127.0.0.1") as http:
                usages = run(plan, "http://127.0.0.1", http, clock)
                hub = app.state.hub
                report = hub.engine(Principal(Scope("default", "default"))
                                    ).usage.report("agent")
            figures[client] = priced(model, usages)
            totals = report.totals
            figures[client].update(
                compactions=totals.compactions,
                ledger_agrees=totals.usage == sum(usages, Usage()),
                full_history_uncached_cost=round(totals.full_cost or 0, 4),
                saving_vs_full_uncached=round(totals.saving or 0, 4))
    figures["loci"]["saving_vs_naive_cached"] = round(
        1 - figures["loci"]["cost"] / figures["naive"]["cost"], 4)
    return figures


def priced(model: str, usages: list[Usage]) -> dict[str, Any]:
    price = price_of(model)
    assert price is not None
    total = sum(usages, Usage())
    return {"calls": len(usages), "input_tokens": total.input_tokens,
            "hit_rate": round(total.cached_tokens / total.input_tokens, 4),
            "cost": round(sum(price.cost(u) for u in usages), 4),
            "uncached_cost": round(price.uncached_cost(total.input_tokens,
                                                       total.output_tokens), 4)}


def record_cost(home: Path, calls: int = 500) -> dict[str, float]:
    """What recording a call adds to a proxied request: ``usage.record`` (the ledger's
    one statement, counting the events since the session's previous call) timed on a
    session of 1,000 events that grows by an exchange per call, with a compiled
    context and a 1.6k-token client system prompt, as the proxy records it."""
    from common import percentiles
    from loci import Loci
    settings = load_settings(home=str(home), store=f"sqlite:///{home}/record.db",
                             memory_mirror=False, workspace=str(home),
                             embedding_provider="hash", compaction_auto=False)
    rng = random.Random(9)
    samples = []
    with Loci(settings) as loci:
        loci.add_events("s", [{"role": "user" if n % 2 == 0 else "assistant",
                               "content": sentence(rng, 30)} for n in range(1_000)])
        context = loci.compile("s", "What next?")
        usage = {"prompt_tokens": 9000, "completion_tokens": 80,
                 "prompt_tokens_details": {"cached_tokens": 8192}}
        for _ in range(calls):
            loci.add_events("s", [{"role": "user", "content": sentence(rng, 14)},
                                  {"role": "assistant", "content": sentence(rng, 30)}])
            started = time.perf_counter()
            loci.usage.record("s", usage, model="gpt-4.1", face="chat", latency_ms=800.0,
                              context=context, client_text=[SYSTEM])
            samples.append((time.perf_counter() - started) * 1000)
    return {f"record_{k}": v for k, v in percentiles(samples).items()}
