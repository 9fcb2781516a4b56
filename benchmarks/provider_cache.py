"""Prompt-cache hits and cost through the proxy, against the providers' published caching
rules (``loci.testing.fake_provider``), beside a naive client in the same run.

An agent conversation of ``turns`` user turns (a 1.6k-token system prompt; a tool call
with a 300-token result every third turn; a memory tag every 25th reply; compaction for a
32k-token window) is driven through each face (``FACES``), with the same replies:

- **Loci**: the client sends its whole message list through Loci's proxy (Chat
  Completions to an OpenAI-style upstream; Messages, its system prompt marked with
  ``cache_control``, to an Anthropic-style upstream, also with extended thinking;
  Responses, only the new items after ``previous_response_id`` and a
  ``responses.compact`` every 100 turns), which records each call in the usage ledger;
- **naive**: the same client sends the same list straight to the same kind of upstream
  (for Anthropic with a breakpoint on its last message, as the provider's guide
  advises): the whole history every time, cached by the provider. The fake provider
  serves no Responses API: that face has no naive run.

Reported per style: the cache-hit rate over input tokens, input tokens, cost under the
price table; the counterfactual of issue #21 (the whole history, uncached) from the
ledger. The upstream's clock advances 30 simulated seconds per call.
"""

from __future__ import annotations

import functools
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import sentence
from loci import Usage, load_settings
from loci.apis.wire import read_usage
from loci.models import Scope
from loci.pricing import price_of
from loci.server import create_app
from loci.server.hub import Principal
from loci.testing import FakeProvider, Reply, Request
from loci.testing.provider_rules import pairing_error, responses_error, signature

MODELS = {"chat": "gpt-4.1", "messages": "claude-sonnet-4-6", "responses": "gpt-5"}
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
                model=MODELS["chat"], messages=sent, tools=[SEARCH],  # type: ignore[arg-type]
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


def run_anthropic(plan: list[Any], base: str, http: Any, clock: Clock,
                  thinking: bool = False) -> list[Usage]:
    """The client's calls in the Messages shape (with extended thinking: its signed
    blocks sent back as they came); the usages it was told."""
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
            extra = {"thinking": {"type": "enabled", "budget_tokens": 1024}} if thinking else {}
            answer = client.messages.create(
                model=MODELS["messages"], max_tokens=2048, tools=[tool], **extra,  # type: ignore[arg-type]
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


def run_responses(plan: list[Any], base: str, http: Any, clock: Clock,
                  reasoning: bool = False) -> list[Usage]:
    """The client's calls in the Responses shape: only the new items, after
    ``previous_response_id``; every 100 turns ``responses.compact``, whose output (the
    user's messages and an opaque compaction item) opens the next input."""
    from openai import OpenAI
    client = OpenAI(base_url=f"{base}/v1", api_key="open", max_retries=0, http_client=http)
    tool = {"type": "function", "name": "search", "description": "Search the repository.",
            "parameters": SEARCH["function"]["parameters"]}
    session = {"X-Loci-Session": "agent"}
    usages, previous, opening = [], None, []
    for n, (message, replies, results) in enumerate(plan):
        items: list[Any] = [*opening, {"role": "user", "content": message}]
        for _ in replies:
            clock.now += 30
            extra = {"reasoning": {"effort": "low"}} if reasoning else {}
            answer = client.responses.create(
                model=MODELS["responses"], instructions=SYSTEM, input=items, tools=[tool],  # type: ignore[list-item]
                previous_response_id=previous, extra_headers=session, **extra)  # type: ignore[arg-type]
            usages.append(read_usage(answer.usage))
            previous = answer.id
            calls = [o for o in answer.output if o.type == "function_call"]
            items = [{"type": "function_call_output", "call_id": c.call_id, "output": r}
                     for c, r in zip(calls, results if calls else [], strict=True)]
        opening = []
        if n and n % 100 == 0:
            compacted = client.responses.compact(model=MODELS["responses"],
                                                 input=message, extra_headers=session)
            opening = [item.model_dump(exclude_none=True, warnings=False)
                       for item in compacted.output]
            previous = None
    return usages


def replies_of(plan: list[Any]) -> list[Reply]:
    return [reply for _, replies, _ in plan for reply in replies]


def drive(face: str, plan: list[Any], home: Path) -> dict[str, Any]:
    """Loci and (but for Responses, which the fake provider does not serve) the naive
    client through ``face``: hit rate and cost of each, the ledger's counterfactual,
    and what reached the upstream: signed thinking blocks sent back and how many were
    altered, tool pairs broken (the fake provider refuses both, as the providers do)."""
    model, upstream, run = FACES[face]
    figures: dict[str, Any] = {}
    for client in ("loci", "naive") if not face.startswith("responses") else ("loci",):
        clock, queue = Clock(), replies_of(plan)
        with FakeProvider(reply=lambda body, queue=queue: queue.pop(0),  # type: ignore[misc]
                          clock=clock) as provider:
            if client == "naive":
                usages = run(plan, provider.url, None, clock)
                figures[client] = priced(model, usages)
                continue
            settings = load_settings(
                home=str(home), store=f"sqlite:///{home}/{face}.db", model=model,
                models={model: 32_000}, memory_mirror=False, workspace=str(home),
                embedding_provider="hash", proxy_provider=upstream,
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
                saving_vs_full_uncached=round(totals.saving or 0, 4),
                **upstream_checks(provider.requests))
    if "naive" in figures:
        figures["loci"]["saving_vs_naive_cached"] = round(
            1 - figures["loci"]["cost"] / figures["naive"]["cost"], 4)
    return figures


def upstream_checks(requests: list[Request]) -> dict[str, int]:
    """Signed blocks sent back to the upstream (Anthropic's thinking, the Responses API's
    reasoning items), those altered, and requests whose tool calls and results do not
    pair up."""
    sent = altered = broken = 0
    for path, body in ((r["path"], r["body"]) for r in requests):
        if path.endswith("/responses"):
            broken += responses_error(body) is not None
            kept = [(b["encrypted_content"], f"reasoning|{b['id']}") for b in body["input"]
                    if b.get("type") == "reasoning"]
        else:
            anthropic = path.endswith("/messages")
            broken += pairing_error(body, anthropic) is not None
            kept = [(b.get("signature"), b["thinking"]) for m in body["messages"]
                    if anthropic and isinstance(m["content"], list)
                    for b in m["content"] if b.get("type") == "thinking"]
        sent += len(kept)
        altered += sum(sign != signature(text) for sign, text in kept)
    return {"signed_blocks_sent_back": sent, "signed_blocks_altered": altered,
            "broken_tool_pairs": broken}


#: Face → (model, upstream provider, the client's calls).
FACES: dict[str, tuple[str, str, Callable[..., list[Usage]]]] = {
    "chat": (MODELS["chat"], "openai", run_openai),
    "messages": (MODELS["messages"], "anthropic", run_anthropic),
    "messages+thinking": (MODELS["messages"], "anthropic",
                          functools.partial(run_anthropic, thinking=True)),
    "responses": (MODELS["responses"], "openai", run_responses),
    "responses native+reasoning": (MODELS["responses"], "openai-responses",
                                   functools.partial(run_responses, reasoning=True)),
}


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
