"""Consolidation over REST (propose, the pending proposal, apply by id, 409 when stale)
and the proposals a server prepares while a user is away, never applied by it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient

from loci import Runtime, load_settings
from loci.server.consolidation import prepare_proposals
from tests.conftest import FakeClock

QUESTION = "User: Can you suggest some unique events to attend in Amsterdam?"
THANKS = "User: Thank you!"
FACT = "I lead a team of 4 engineers in my new role as Senior Software Engineer."


def remember(client: TestClient, text: str) -> str:
    response = client.post("/api/memories", json={"content": text})
    assert response.status_code == 201
    return str(response.json()["id"])


def test_propose_review_and_apply(client: TestClient) -> None:
    question, fact = remember(client, QUESTION), remember(client, FACT)
    assert client.get("/api/memories/consolidation").status_code == 404
    proposal = client.post("/api/memories/consolidation").json()
    assert proposal["counts"]["retire"] == 1 and proposal["proposer"] == "rules"
    (change,) = proposal["changes"]
    assert change["ids"] == [question] and change["texts"] == [QUESTION]
    assert client.get("/api/memories/consolidation").json() == proposal
    assert {m["id"] for m in client.get("/api/memories").json()} == {question, fact}
    wrong = client.post("/api/memories/consolidation/prop_nope/apply")
    assert wrong.status_code == 404 and "prop_nope" in wrong.json()["error"]["message"]
    done = client.post(f"/api/memories/consolidation/{proposal['id']}/apply")
    assert done.status_code == 200 and done.json()["counts"]["retire"] == 1
    assert [m["id"] for m in client.get("/api/memories").json()] == [fact]
    history = client.get(f"/api/memories/{question}/history").json()
    assert history[0]["content"] == QUESTION
    again = client.post(f"/api/memories/consolidation/{proposal['id']}/apply")
    assert again.status_code == 404


def test_a_stale_proposal_is_a_409(client: TestClient, clock: FakeClock) -> None:
    question = remember(client, QUESTION)
    proposal = client.post("/api/memories/consolidation").json()
    clock.advance(seconds=1)
    client.put(f"/api/memories/{question}", json={"content": QUESTION + " Or Utrecht?"})
    stale = client.post(f"/api/memories/consolidation/{proposal['id']}/apply")
    assert stale.status_code == 409 and question in stale.json()["error"]["message"]
    assert client.get(f"/api/memories/{question}").json()["expires_at"] is not None
    assert [m["id"] for m in client.get("/api/memories").json()] == [question]


def test_search_past_over_rest(client: TestClient) -> None:
    remember(client, "The user lives in Lisbon")
    remember(client, "The user lives in Porto now")
    now = client.post("/api/search", json={"query": "where does the user live"}).json()
    assert [(h["summary"], h["status"]) for h in now] == [
        ("The user lives in Porto now", "active"), ("The user lives in Lisbon", "superseded")]
    current = client.post("/api/search", json={"query": "where does the user live",
                                                "past": False}).json()
    assert [h["summary"] for h in current] == ["The user lives in Porto now"]
    past = client.post("/api/search", json={"query": "where does the user live",
                                             "past": True}).json()
    assert {h["status"] for h in past} == {"active", "superseded"}


def test_the_server_prepares_proposals_when_idle_and_never_applies_them(
        home: Path, clock: FakeClock) -> None:
    runtime = Runtime(load_settings(store=f"sqlite:///{home / 'loci.db'}"), clock=clock)
    try:
        maya = runtime.scope("maya")
        maya.remember(THANKS)
        maya.remember(FACT)
        idle = timedelta(minutes=30)
        assert prepare_proposals(runtime, idle) == []  # just written: not idle yet
        clock.advance(minutes=31)
        before = maya.memories(include_expired=True)
        (prepared,) = prepare_proposals(runtime, idle)
        assert prepared.tenant == "maya"
        pending = maya.consolidation()
        assert pending is not None and pending.counts()["retire"] == 1
        assert maya.memories(include_expired=True) == before  # proposed, not applied
        assert prepare_proposals(runtime, idle) == []  # nothing changed since
        clock.advance(minutes=31)
        assert prepare_proposals(runtime, idle) == []
    finally:
        runtime.close()
