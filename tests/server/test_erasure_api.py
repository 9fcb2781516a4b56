"""Erasure over REST, through the real ASGI app: a session (listed, then erased with
what was derived from it) and the caller's own user, never another user's data."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from loci import load_settings, open_store
from loci.server import create_app
from tests.conftest import FakeClock
from tests.server.conftest import LOCAL, LiveServer, make_key

ALICE, BOB = {"X-Loci-User": "alice"}, {"X-Loci-User": "bob"}


def fill(client: TestClient, headers: dict[str, str]) -> None:
    client.post("/api/sessions/s1/events", headers=headers,
                json={"role": "user", "content": "My kayak is red."})
    client.post("/api/sessions/s1/reply", headers=headers,
                json={"content": "Noted. [MEMORY:fact] The kayak is red. [/MEMORY]"})
    client.post("/api/sessions/s2/events", headers=headers,
                json={"role": "user", "content": "Something else."})


def test_erase_a_session_over_rest(client: TestClient) -> None:
    fill(client, ALICE)
    fill(client, BOB)
    plan = client.delete("/api/sessions/s1", params={"dry_run": "true"}, headers=ALICE)
    assert plan.status_code == 200, plan.text
    listed = plan.json()
    assert listed["events"] == 2 and len(listed["memories"]) == 1 and listed["dry_run"]
    assert len(client.get("/api/sessions/s1/events", headers=ALICE).json()) == 2
    done = client.delete("/api/sessions/s1", headers=ALICE).json()
    assert done["events"] == 2 and done["memories"] == listed["memories"]
    assert client.get("/api/sessions/s1/events", headers=ALICE).status_code == 404
    assert client.get(f"/api/memories/{listed['memories'][0]}", headers=ALICE).status_code == 404
    assert client.delete("/api/sessions/s1", headers=ALICE).status_code == 404
    assert len(client.get("/api/sessions/s1/events", headers=BOB).json()) == 2


def test_a_user_erases_only_themselves(client: TestClient) -> None:
    fill(client, ALICE)
    fill(client, BOB)
    hub = client.app.state.hub  # type: ignore[attr-defined]
    alice_key, bob_key = make_key(hub, "alice"), make_key(hub, "bob")
    as_alice = {"Authorization": f"Bearer {alice_key}"}
    refused = client.delete("/api/user", params={"confirm": "bob"}, headers=as_alice)
    assert refused.status_code == 422 and "alice" in refused.text
    done = client.delete("/api/user", params={"confirm": "alice"}, headers=as_alice)
    assert done.status_code == 200, done.text
    assert done.json()["user"] == "alice" and done.json()["rows"] > 3
    # Her key went with her; bob's data and key did not.
    assert client.get("/api/sessions", headers=as_alice).status_code == 401
    as_bob = {"Authorization": f"Bearer {bob_key}"}
    assert [s["id"] for s in client.get("/api/sessions", headers=as_bob).json()] == [
        "s2", "s1"]


def test_an_operator_key_erases_any_user(client: TestClient) -> None:
    fill(client, ALICE)
    fill(client, BOB)
    hub = client.app.state.hub  # type: ignore[attr-defined]
    bob_key = make_key(hub, "bob")
    _, operator = hub.runtime.create_key(None, "ops")
    as_operator = {"Authorization": f"Bearer {operator}"}
    as_bob = {"Authorization": f"Bearer {bob_key}"}
    # A user's key acts for its user only; the operator's for the user it names.
    assert client.get("/api/sessions", headers={**as_bob, **ALICE}).status_code == 403
    listed = client.get("/api/sessions", headers={**as_operator, **ALICE})
    assert [s["id"] for s in listed.json()] == ["s2", "s1"]
    done = client.delete("/api/user", params={"confirm": "bob"}, headers={**as_operator, **BOB})
    assert done.status_code == 200 and done.json()["user"] == "bob"
    assert client.get("/api/sessions", headers=as_bob).status_code == 401
    assert client.get("/api/sessions", headers={**as_operator, **BOB}).json() == []
    assert len(client.get("/api/sessions", headers={**as_operator, **ALICE}).json()) == 2


def test_the_server_applies_retention_when_it_starts(home: Path, clock: FakeClock) -> None:
    settings = load_settings(store=f"sqlite:///{home / 'loci.db'}", embedding_provider="hash",
                             retention_days=7)
    seeding = create_app(settings, clock=clock)
    with TestClient(seeding, base_url=LOCAL) as c:  # its own first run finds nothing old
        fill(c, ALICE)
    clock.advance(days=8)
    with TestClient(create_app(settings, clock=clock), base_url=LOCAL) as c:
        for _ in range(100):  # the daily task runs in the background at start-up
            if c.get("/api/sessions", headers=ALICE).json() == []:
                break
            time.sleep(0.05)
        assert c.get("/api/sessions", headers=ALICE).json() == []
        assert c.get("/api/memories", headers=ALICE).json()  # memories stay


def test_forget_a_memory_with_its_tag_over_rest(client: TestClient) -> None:
    fill(client, ALICE)
    [memory] = client.get("/api/memories", headers=ALICE).json()
    done = client.delete(f"/api/memories/{memory['id']}", params={"redact_source": "true"},
                         headers=ALICE)
    assert done.status_code == 204, done.text
    events = client.get("/api/sessions/s1/events", headers=ALICE).json()
    assert [e["content"] for e in events] == ["My kayak is red.", "Noted."]
    assert all("raw" not in (e["metadata"] or {}) for e in events)


def test_redact_an_earlier_version_over_rest(client: TestClient) -> None:
    for text in ("code 4711", "no code"):
        assert client.put("/api/kb/doc", params={"path": "/n.md"}, headers=ALICE,
                          json={"content": text}).status_code == 200
    done = client.delete("/api/kb/history", params={"path": "/n.md", "version": 1},
                         headers=ALICE)
    assert done.status_code == 200 and done.json()["content"] == ""
    history = client.get("/api/kb/history", params={"path": "/n.md"}, headers=ALICE).json()
    assert [(v["version"], v["content"]) for v in history] == [(1, "")]
    current = client.delete("/api/kb/history", params={"path": "/n.md", "version": 2},
                            headers=ALICE)
    assert current.status_code == 422 and "current version" in current.text
    assert client.delete("/api/kb/history", params={"path": "/n.md", "version": 1},
                         headers=BOB).status_code == 404


def test_an_erasure_waits_for_the_user_s_writes_under_way_and_none_outlives_it(
        live_server: LiveServer, home: Path) -> None:
    """Writers keep posting as alice while she erases herself: what they had under way
    ends first, what comes later is refused, and nothing of hers is left."""
    db = f"sqlite:///{home / 'e.db'}"
    app = create_app(load_settings(store=db, memory_mirror=False))
    url = live_server(app)
    key = make_key(app.state.hub, "alice")  # type: ignore[attr-defined]
    headers = {"Authorization": f"Bearer {key}"}
    stop = threading.Event()

    def write(i: int) -> set[int]:
        statuses = set()
        with httpx.Client(base_url=url, headers=headers, timeout=60) as writer:
            while not stop.is_set():
                statuses.add(writer.post(f"/api/sessions/w{i}/events", json={
                    "role": "user", "content": f"a line from writer {i}"}).status_code)
        return statuses

    with ThreadPoolExecutor(6) as pool:
        writing = [pool.submit(write, i) for i in range(6)]
        time.sleep(0.5)
        erased = httpx.delete(f"{url}/api/user", params={"confirm": "alice"},
                              headers=headers, timeout=60)
        time.sleep(0.3)
        stop.set()
        statuses = set().union(*(w.result() for w in writing))
    assert erased.status_code == 200, erased.text
    assert statuses <= {201, 401, 409}
    store = open_store(db)
    try:
        assert [s for s in store.list_scopes() if s.tenant == "alice"] == []
    finally:
        store.close()
