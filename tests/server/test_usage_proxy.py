"""Usage through the proxy: every upstream call recorded in the session's ledger with
what the upstream's prompt cache reported, streamed or not, on each face, against the
fake provider (``loci.testing.fake_provider``: the providers' published caching rules over
real HTTP); the client gets the cached counts in its API's shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic
from fastapi import FastAPI
from openai import OpenAI

from loci import load_settings
from loci.server import create_app
from loci.testing import FakeProvider
from tests.server.conftest import LiveServer
from tests.server.fake_upstream import SESSION, engine

#: Long enough that the provider caches it (1,024 tokens at least).
RULES = "You are a careful assistant. " + " ".join(
    f"Rule {n}: answer with the figures of step {n} first." for n in range(200))


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(reply=lambda body: "Noted, step done.") as fake:
        yield fake


def app_for(home: Path, provider: FakeProvider, kind: str) -> FastAPI:
    return create_app(load_settings(
        store=f"sqlite:///{home / 'usage.db'}", proxy_provider=kind,
        proxy_base_url=f"{provider.url}/v1", proxy_api_key="sk-fake"))


def chat_turns(base: str, turns: int, stream: bool) -> list[Any]:
    usages = []
    with OpenAI(base_url=f"{base}/v1", api_key="open", max_retries=0) as oai:
        for n in range(turns):
            messages = [{"role": "system", "content": RULES},
                        {"role": "user", "content": f"Step {n}: the figures, please."}]
            if stream:
                chunks = list(oai.chat.completions.create(
                    model="gpt-4o", messages=messages, stream=True, extra_headers=SESSION,
                    stream_options={"include_usage": True}))
                usages.append(chunks[-1].usage)
            else:
                usages.append(oai.chat.completions.create(
                    model="gpt-4o", messages=messages, extra_headers=SESSION).usage)
    return usages


@pytest.mark.parametrize("stream", [False, True])
def test_chat_calls_are_recorded_with_openais_cached_tokens(
        home: Path, provider: FakeProvider, live_server: LiveServer, stream: bool) -> None:
    app = app_for(home, provider, "openai")
    usages = chat_turns(live_server(app), 4, stream)
    records = engine(app).usage.records("work")
    assert len(records) == 4 and {r.face for r in records} == {"chat"}
    # The client's system prompt comes first on every call: from the second call on
    # the upstream reads it (and the history) from its cache.
    assert records[0].cached_tokens == 0
    assert all(r.cached_tokens >= 1024 for r in records[1:])
    assert [u.prompt_tokens_details.cached_tokens for u in usages] == [
        r.cached_tokens for r in records]
    assert [u.prompt_tokens for u in usages] == [r.input_tokens for r in records]
    if stream:  # the proxy asked the upstream for the usage of its stream
        assert all(body["stream_options"] == {"include_usage": True}
                   for body in (r["body"] for r in provider.requests))
    first, last = records[0], records[-1]
    assert last.log_events == 6 and last.log_tokens > first.log_tokens == 0
    assert first.base_tokens > 1000  # the client's own system prompt
    assert all(r.latency_ms is not None and r.latency_ms > 0 for r in records)
    assert last.layers.get("history", 0) > 0 and last.prefix_hash == first.prefix_hash


@pytest.mark.parametrize("stream", [False, True])
def test_messages_calls_are_recorded_with_anthropics_cache_reads_and_writes(
        home: Path, provider: FakeProvider, live_server: LiveServer, stream: bool) -> None:
    app = app_for(home, provider, "anthropic")
    seen = []
    with Anthropic(base_url=live_server(app), api_key="open", max_retries=0) as claude:
        for n in range(4):
            ask: dict[str, Any] = {
                "model": "claude-sonnet-4-6", "max_tokens": 64, "extra_headers": SESSION,
                "system": [{"type": "text", "text": RULES,
                            "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": f"Step {n}: the figures?"}]}
            if stream:
                with claude.messages.stream(**ask) as events:
                    seen.append(events.get_final_message().usage)
            else:
                seen.append(claude.messages.create(**ask).usage)
    records = engine(app).usage.records("work")
    assert [r.face for r in records] == ["messages"] * 4
    assert records[0].cache_write_tokens > 1000 and records[0].cached_tokens == 0
    assert all(r.cached_tokens > 1000 for r in records[1:])
    # Loci marks the end of its history: each call reads the previous call's history.
    assert records[3].cached_tokens > records[1].cached_tokens
    for usage, record in zip(seen, records, strict=True):
        assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (
            record.cached_tokens, record.cache_write_tokens)
        assert usage.input_tokens == record.usage.uncached_tokens
        assert usage.output_tokens == record.output_tokens > 0


@pytest.mark.parametrize("stream", [False, True])
def test_responses_calls_are_recorded(
        home: Path, provider: FakeProvider, live_server: LiveServer, stream: bool) -> None:
    app = app_for(home, provider, "openai")
    with OpenAI(base_url=f"{live_server(app)}/v1", api_key="open", max_retries=0) as oai:
        for n in range(3):
            ask: dict[str, Any] = {"model": "gpt-5", "instructions": RULES,
                                   "input": f"Step {n}?", "extra_headers": SESSION}
            if stream:
                with oai.responses.stream(**ask) as events:
                    usage = events.get_final_response().usage
            else:
                usage = oai.responses.create(**ask).usage
    records = engine(app).usage.records("work")
    assert [r.face for r in records] == ["responses"] * 3
    assert usage is not None and usage.input_tokens_details.cached_tokens == (
        records[-1].cached_tokens) >= 1024


def test_a_failing_ledger_never_costs_the_answer(
        home: Path, provider: FakeProvider, live_server: LiveServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from loci.errors import StoreError
    from loci.usage import UsageLedger

    def broken(*args: Any, **kwargs: Any) -> None:
        raise StoreError("database is locked")

    monkeypatch.setattr(UsageLedger, "record", broken)
    app = app_for(home, provider, "openai")
    chat_turns(live_server(app), 1, stream=False)
    assert [e.content for e in engine(app).events("work")] == [
        "Step 0: the figures, please.", "Noted, step done."]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropics_own_compaction_goes_through_and_loci_starts_from_it(
        home: Path, live_server: LiveServer, stream: bool) -> None:
    """With ``compact_20260112`` the provider summarizes the conversation into a
    compaction block: the client gets it, Loci keeps it with the turn and sends it back
    unchanged (the fake provider refuses an altered one), and the history Loci sends and
    compacts itself starts there: what the block stands for is not sent or compacted
    a second time."""
    replies = iter(["First answer.", "Second answer.", "Third answer."])
    with FakeProvider(reply=lambda body: next(replies)) as fake:
        app = app_for(home, fake, "anthropic")
        edits = {"edits": [{"type": "compact_20260112",
                            "trigger": {"type": "input_tokens", "value": 500}}]}
        seen = []
        with Anthropic(base_url=live_server(app), api_key="open", max_retries=0) as claude:
            for n, text in enumerate(["Hello.", RULES[:2000] + " Noted?", "And now?"]):
                ask: dict[str, Any] = {
                    "model": "claude-sonnet-4-6", "max_tokens": 64, "extra_headers": SESSION,
                    "betas": ["compact-2026-01-12"], "context_management": edits,
                    "messages": [{"role": "user", "content": f"{n}: {text}"}]}
                if stream:
                    with claude.beta.messages.stream(**ask) as events:
                        seen.append(events.get_final_message())
                else:
                    seen.append(claude.beta.messages.create(**ask))
    # The second request crossed the trigger: its answer starts with the summary.
    assert [b.type for b in seen[1].content] == ["compaction", "text"]
    block = seen[1].content[0].model_dump(exclude_none=True)
    assert block["content"].startswith("Summary of")
    third = fake.requests[-1]["body"]["messages"]
    # The last request starts with the turn the summary answered, the block as it came.
    assert third[0]["role"] == "user" and "1: " in json.dumps(third[0])
    assert third[1]["content"][0] == {
        k: v for k, v in block.items() if k in ("type", "content", "encrypted_content")}
    assert "0: Hello." not in json.dumps(third)
    loci = engine(app)
    assert loci.compact("work").archived == 0  # nothing after the summary to compact
    assert "compact_20260112" in loci.compile("work", "next?").explain()
