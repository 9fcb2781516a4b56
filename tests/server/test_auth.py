"""API keys and tenant isolation: one tenant can never read, search, change or delete
another's data through any REST route; open mode is loopback-only."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from loci import Scope, open_store
from loci.cli.app import main
from loci.keys import create_key
from tests.conftest import FakeClock


@pytest.fixture
def keys(db: str, clock: FakeClock) -> dict[str, str]:
    store = open_store(db)
    try:
        return {user: create_key(store, user, clock())[1] for user in ("alice", "bob")}
    finally:
        store.close()


def auth(key: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **extra}


def seed(client: TestClient, key: str) -> dict[str, str]:
    """Alice's data of every kind; returns the ids Bob will try to reach."""
    h = auth(key)
    mid = client.post("/api/memories", headers=h,
                      json={"content": "Alice's secret: the vault code is 4711",
                            "type": "sticky"}).json()["id"]
    client.put("/api/state/vault", headers=h, json={"value": "4711"})
    client.post("/api/sessions/private/events", headers=h,
                json={"role": "user", "content": "the vault code is 4711"})
    client.put("/api/kb/doc", params={"path": "/secret/vault.md"}, headers=h,
               json={"content": "vault code 4711"})
    assert client.post("/api/usage", headers=h, json={
        "session": "private", "model": "gpt-4o",
        "usage": {"prompt_tokens": 4711, "completion_tokens": 1}}).status_code == 201
    return {"memory": mid}


def test_requests_need_a_valid_key_once_keys_exist(client: TestClient,
                                                   keys: dict[str, str]) -> None:
    assert client.get("/api/health").status_code == 200
    missing = client.get("/api/memories")
    assert missing.status_code == 401 and "API key" in missing.json()["error"]["message"]
    assert client.get("/api/memories", headers=auth("loci_nope_nope")).status_code == 401
    assert client.get("/api/memories", headers={"Authorization": "Basic abc"}).status_code \
        == 401
    assert client.get("/api/memories", headers=auth(keys["alice"])).status_code == 200
    wrong_user = client.get("/api/memories", headers=auth(keys["alice"], **{
        "X-Loci-User": "bob"}))
    assert wrong_user.status_code == 403


def test_revoked_key_is_refused_once_the_check_expires(
        client: TestClient, keys: dict[str, str], db: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The server remembers a key check for _KEYS_TTL seconds (2 s; shortened here).
    monkeypatch.setattr("loci.server.hub._KEYS_TTL", 0.2)
    assert client.get("/api/memories", headers=auth(keys["bob"])).status_code == 200
    key_id = keys["bob"].split("_")[1]
    assert main(["keys", "revoke", key_id, "--store", db]) == 0
    time.sleep(0.25)
    assert client.get("/api/memories", headers=auth(keys["bob"])).status_code == 401
    assert main(["keys", "revoke", key_id, "--store", db]) == 2
    assert "no active API key" in capsys.readouterr().err


OTHER_TENANT_ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/api/memories/{memory}", {}),
    ("GET", "/api/memories/{memory}/read", {}),
    ("GET", "/api/memories/{memory}/history", {}),
    ("PUT", "/api/memories/{memory}", {"json": {"content": "pwned"}}),
    ("DELETE", "/api/memories/{memory}", {}),
    ("GET", "/api/state/vault", {}),
    ("DELETE", "/api/state/vault", {}),
    ("GET", "/api/sessions/private", {}),
    ("GET", "/api/sessions/private/events", {}),
    ("GET", "/api/sessions/private/export", {}),
    ("GET", "/api/sessions/private/compactions", {}),
    ("POST", "/api/sessions/private/compact", {}),
    ("POST", "/api/sessions/private/end", {}),
    ("GET", "/api/kb/doc", {"params": {"path": "/secret/vault.md"}}),
    ("GET", "/api/kb/read", {"params": {"path": "/secret/vault.md"}}),
    ("GET", "/api/kb/history", {"params": {"path": "/secret/vault.md"}}),
    ("DELETE", "/api/kb/doc", {"params": {"path": "/secret/vault.md"}}),
]


@pytest.mark.parametrize(("method", "path", "kwargs"), OTHER_TENANT_ROUTES)
def test_another_tenant_cannot_reach_alices_items(
    client: TestClient, keys: dict[str, str], method: str, path: str, kwargs: dict[str, Any],
) -> None:
    ids = seed(client, keys["alice"])
    url = path.format(**ids)
    response = client.request(method, url, headers=auth(keys["bob"]), **kwargs)
    assert response.status_code == 404, (method, url, response.text)
    # ... and asking as Bob's own agent name, or naming Alice as the user, changes nothing.
    as_alice = client.request(method, url, headers=auth(keys["bob"], **{
        "X-Loci-User": "alice"}), **kwargs)
    assert as_alice.status_code == 403
    # Alice's data is intact.
    a = auth(keys["alice"])
    assert client.get(f"/api/memories/{ids['memory']}", headers=a).json()["content"] \
        .startswith("Alice's secret")
    assert client.get("/api/state/vault", headers=a).json()["value"] == "4711"
    assert client.get("/api/kb/doc", params={"path": "/secret/vault.md"},
                      headers=a).status_code == 200
    assert client.get("/api/sessions/private/events", headers=a).json()[0]["content"] \
        == "the vault code is 4711"


def test_another_tenant_lists_and_searches_nothing(client: TestClient,
                                                   keys: dict[str, str]) -> None:
    seed(client, keys["alice"])
    b = auth(keys["bob"])
    searches = [client.post("/api/search", headers=b, json={"query": "vault code 4711"}),
                client.post("/api/recall", headers=b, json={"query": "vault code 4711"}),
                client.post("/api/kb/search", headers=b, json={"query": "vault code"})]
    assert [s.json() for s in searches] == [[], [], []]
    lists = ["/api/memories", "/api/state", "/api/sessions", "/api/kb"]
    assert [client.get(u, headers=b).json() for u in lists] == [[], [], [], []]
    assert client.get("/api/kb/tree", headers=b).json()["count"] == 0
    for params in ({}, {"session": "private"}, {"all_agents": "true"}):
        assert client.get("/api/usage", headers=b, params=params).json()["totals"][
            "calls"] == 0
    assert client.get("/api/usage", headers=auth(keys["alice"])).json()["totals"][
        "input_tokens"] == 4711
    # The dashboard's pickers offer a user key its own user only.
    assert client.get("/api/scopes", headers=b).json() == []
    assert client.get("/api/scopes", headers=auth(keys["alice"])).json() == [
        {"user": "alice", "agent": "default"}]
    context = client.post("/api/sessions/bobs/context", headers=b,
                          json={"message": "what is the vault code?"}).json()
    assert "4711" not in str(context["messages"])
    # Bob writing at the same ids and keys lands in Bob's own scope.
    client.put("/api/state/vault", headers=b, json={"value": "0000"})
    assert client.get("/api/state/vault", headers=auth(keys["alice"])).json()["value"] == "4711"


def test_agents_of_one_tenant_are_separate(client: TestClient, keys: dict[str, str]) -> None:
    a = auth(keys["alice"])
    client.put("/api/state/k", headers={**a, "X-Loci-Agent": "coder"}, json={"value": "1"})
    assert client.get("/api/state/k", headers=a).status_code == 404
    assert client.get("/api/state/k", headers={**a, "X-Loci-Agent": "coder"}).status_code \
        == 200
    bad = client.get("/api/state", headers={**a, "X-Loci-Agent": "\x01"})
    assert bad.status_code == 422


def test_open_mode_scopes_by_user_header(client: TestClient, db: str) -> None:
    client.put("/api/state/k", headers={"X-Loci-User": "carol"}, json={"value": "c"})
    assert client.get("/api/state/k").status_code == 404
    assert client.get("/api/state/k", headers={"X-Loci-User": "carol"}).json()["value"] == "c"
    store = open_store(db)
    try:
        item = store.get_state(Scope("carol", "default"), "k")
    finally:
        store.close()
    assert item is not None and item.value == "c"


def test_serve_refuses_a_public_address_without_keys(
    db: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--store", db]) == 2
    assert "without API keys" in capsys.readouterr().err


def test_keys_cli_create_list_and_secret_never_listed(
    db: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["keys", "create", "--user", "dave", "--label", "ci", "--store", db]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("loci_")
    assert main(["keys", "list", "--store", db]) == 0
    listed = capsys.readouterr().out
    assert "dave" in listed and "ci" in listed and key.split("_", 2)[2] not in listed
    assert main(["keys", "create", "--user", "\x00", "--store", db]) == 2
    assert main(["keys", "create", "--store", db]) == 2  # neither a user nor --operator
    assert main(["keys", "create", "--user", "dave", "--operator", "--store", db]) == 2
    capsys.readouterr()
    assert main(["keys", "create", "--operator", "--store", db]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("loci_") and "for the operator" in captured.err
