"""``[memory] scope = "user"`` through the server: REST memory routes of one agent serve
what another agent of the user wrote (never another user's), and idle consolidation
prepares one proposal for the user's shared memories."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from loci import Runtime, Scope, load_settings
from loci.models import SHARED_AGENT
from loci.server.consolidation import prepare_proposals
from tests.conftest import FakeClock

PLANNER = {"X-Loci-User": "maya", "X-Loci-Agent": "planner"}
CODER = {"X-Loci-User": "maya", "X-Loci-Agent": "coder"}
OTHER = {"X-Loci-User": "ravi", "X-Loci-Agent": "planner"}
FACT = "I lead a team of 4 engineers in my new role as Senior Software Engineer."


@pytest.mark.loci_settings(memory_scope="user")
def test_another_agent_of_the_user_reads_and_finds_the_memory(client: TestClient) -> None:
    created = client.post("/api/memories", headers=PLANNER, json={"content": FACT})
    assert created.status_code == 201
    memory_id = created.json()["id"]
    assert [m["id"] for m in client.get("/api/memories", headers=CODER).json()] == [memory_id]
    assert client.get(f"/api/memories/{memory_id}", headers=CODER).json()["content"] == FACT
    found = client.post("/api/search", headers=CODER,
                        json={"query": "How many engineers does the user lead?"}).json()
    assert [h["id"] for h in found] == [memory_id]
    assert client.get("/api/memories", headers=OTHER).json() == []
    assert client.get(f"/api/memories/{memory_id}", headers=OTHER).status_code == 404
    # The dashboard lists agents, not the user's shared memories' reserved one.
    agents = {s["agent"] for s in client.get("/api/scopes").json()}
    assert SHARED_AGENT not in agents


def test_idle_consolidation_prepares_one_proposal_for_shared_memories(
        home: Path, clock: FakeClock) -> None:
    settings = load_settings(store=f"sqlite:///{home / 'loci.db'}", memory_scope="user")
    with Runtime(settings, clock=clock) as runtime:
        runtime.scope("maya", "planner").remember("User: Thank you!")
        runtime.scope("maya", "coder").remember(FACT)
        clock.advance(minutes=31)
        assert prepare_proposals(runtime, timedelta(minutes=30)) == [
            Scope("maya", SHARED_AGENT)]
        pending = runtime.scope("maya", "coder").consolidation()
        assert pending is not None and pending.counts()["retire"] == 1
        assert runtime.scope("maya", "planner").consolidation() == pending
