"""Facts from every turn through each face: a fact the user states in a proxied turn
(the official ``openai`` and ``anthropic`` clients against the proxy served by uvicorn,
with the scripted upstream of ``fake_upstream``) is a memory before the next call's
compile; events written over REST are extracted too."""

from __future__ import annotations

from pathlib import Path

from anthropic import Anthropic
from fastapi.testclient import TestClient

from loci import load_settings
from loci.server import create_app
from tests.conftest import FakeClock
from tests.server.conftest import LOCAL, LiveServer
from tests.server.fake_upstream import Upstream, client, engine, proxy_app, system_text

FACT = "The user's dog is called Biscuit."


def test_chat_completions_a_stated_fact_is_a_memory_at_the_next_call(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    upstream.replies += ["What a lovely name.", "Biscuit."]
    with client(live_server(app)) as oai:
        oai.chat.completions.create(model="m", user="walks", messages=[
            {"role": "user", "content": "Hi! My dog is called Biscuit."}])
        # Another session: only the memory can carry the fact there.
        oai.chat.completions.create(model="m", user="vet", messages=[
            {"role": "user", "content": "What is my pet called?"}])
    assert FACT in system_text(upstream.last)
    assert [m.content for m in engine(app).memories()] == [FACT]


def test_messages_face_a_stated_fact_is_a_memory_at_the_next_call(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    upstream.replies += ["What a lovely name.", "Biscuit."]
    with Anthropic(base_url=live_server(app), api_key="open", max_retries=0) as claude:
        for session, text in (("walks", "My dog is called Biscuit."),
                              ("vet", "What is my pet called?")):
            claude.messages.create(model="claude-test", max_tokens=64,
                                   extra_headers={"X-Loci-Session": session},
                                   messages=[{"role": "user", "content": text}])
    assert FACT in system_text(upstream.last)


def test_responses_face_a_stated_fact_is_a_memory_at_the_next_call(
        home: Path, upstream: Upstream, live_server: LiveServer) -> None:
    app = proxy_app(home, upstream)
    upstream.replies += ["What a lovely name.", "Biscuit."]
    with client(live_server(app)) as oai:
        for session, text in (("walks", "My dog is called Biscuit."),
                              ("vet", "What is my pet called?")):
            oai.responses.create(model="m", input=text,
                                 extra_headers={"X-Loci-Session": session})
    assert FACT in system_text(upstream.last)


def test_events_written_over_rest_are_extracted(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store=f"sqlite:///{home / 'loci.db'}")
    app = create_app(settings, clock=clock)
    with TestClient(app, base_url=LOCAL) as rest:
        written = rest.post("/api/sessions/work/events", json=[
            {"role": "user", "content": "What should I cook tonight?"},
            {"role": "user", "content": "I'm allergic to peanuts."}])
        assert written.status_code in (200, 201)
        assert engine(app).wait_extracted(10)
        listed = rest.get("/api/memories").json()
    assert [m["content"] for m in listed] == ["The user is allergic to peanuts."]
