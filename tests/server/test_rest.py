"""The REST API, in process through the real ASGI app: every route family, the error
shape, 413 for large bodies, and hostile input."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

pytestmark = pytest.mark.loci_settings(server_max_body=64_000)


def error(response: object) -> str:
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}, body
    return str(body["error"]["message"])


def test_health_and_openapi(client: TestClient) -> None:
    assert client.get("/api/health").json()["status"] == "ok"
    assert client.get("/docs").status_code == 200
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    assert {"/api/sessions/{session}/events", "/api/search", "/api/kb/doc",
            "/api/state/{key}", "/api/sessions/{session}/context"} <= set(paths)
    # The auth headers are read from the request, not declared: documented all the same.
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    search = paths["/api/search"]["post"]
    assert {"X-Loci-User", "X-Loci-Agent"} <= {p["name"] for p in search["parameters"]}
    assert search["security"] == [{"apiKey": []}, {}]
    assert "security" not in paths["/api/health"]["get"]
    assert client.get("/openapi.json").json() == schema  # built once, not extended again


def test_events_append_list_export_import(client: TestClient) -> None:
    one = client.post("/api/sessions/work/events", json={"role": "user", "content": "hi"})
    assert one.status_code == 201 and one.json()[0]["content"] == "hi"
    batch = [{"type": "tool_call", "role": "assistant", "tool_name": "read",
              "tool_call_id": "c1", "args": {"path": "a.md"}},
             {"type": "tool_result", "role": "tool", "tool_call_id": "c1", "content": "A"}]
    assert len(client.post("/api/sessions/work/events", json=batch).json()) == 2
    events = client.get("/api/sessions/work/events").json()
    assert [e["type"] for e in events] == ["message", "tool_call", "tool_result"]
    assert client.get("/api/sessions/work/events", params={"after": events[0]["id"],
                                                          "limit": 1}).json()[0]["id"] == 2
    info = client.get("/api/sessions/work").json()
    assert info["event_count"] == 3
    exported = client.get("/api/sessions/work/export")
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    lines = exported.text.splitlines()
    assert len(lines) == 3 and json.loads(lines[1])["toolName"] == "read"
    copied = client.post("/api/sessions/copy/import", content=exported.text)
    assert copied.json() == {"imported": 3}
    assert {s["id"] for s in client.get("/api/sessions").json()} == {"copy", "work"}


def test_bad_events_store_nothing(client: TestClient) -> None:
    bad_role = client.post("/api/sessions/s/events", json={"role": "wizard", "content": "x"})
    assert bad_role.status_code == 422 and "role" in error(bad_role)
    broken = client.post("/api/sessions/s/events", content=b"{not json",
                         headers={"content-type": "application/json"})
    assert broken.status_code == 422
    bad_line = client.post("/api/sessions/s/import", content='{"role": "user"}\nnot json\n')
    assert bad_line.status_code == 422
    not_utf8 = client.post("/api/sessions/s/import", content=b'{"role": "user"}\xff\n')
    assert not_utf8.status_code == 422 and "UTF-8" in error(not_utf8)
    missing = client.get("/api/sessions/s/events")
    assert missing.status_code == 404 and "no session" in error(missing)


def test_context_compile_with_explain_and_formats(client: TestClient) -> None:
    client.post("/api/memories", json={"content": "User's name is Maya", "type": "sticky"})
    client.post("/api/sessions/work/events", json={"role": "user", "content": "hello"})
    body = client.post("/api/sessions/work/context", json={"message": "Who am I?"}).json()
    assert body["messages"][-1] == {"role": "user", "content": "Who am I?"}
    assert any("Maya" in m["content"] for m in body["messages"] if m["role"] == "system")
    layer = next(x for x in body["layers"] if x["name"] == "sticky")
    assert layer["used"] > 0 and layer["budget"] >= layer["used"]
    assert body["prefix_hash"] in body["explain"]
    anthropic = client.post("/api/sessions/work/context",
                            json={"message": "Who am I?", "format": "anthropic"}).json()
    assert anthropic["messages"]["system"][0]["cache_control"] == {"type": "ephemeral"}
    text = client.post("/api/sessions/work/context", json={"format": "text"}).json()
    assert text["messages"].startswith("[system]")
    bad = client.post("/api/sessions/work/context", json={"format": "xml"})
    assert bad.status_code == 422
    sized = client.post("/api/sessions/work/context", json={"window": 6000}).json()
    assert sized["window"] == 6000
    assert client.post("/api/sessions/work/context", json={"window": 10}).status_code == 422


def test_context_compacts_a_session_over_the_threshold_first(client: TestClient) -> None:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 40}
             for i in range(60)]
    client.post("/api/sessions/long/events", json=turns)
    small = {"model": "gpt-4"}  # an 8k window: 60 long turns are well over the threshold
    quiet = client.post("/api/sessions/long/context", json={"message": "hi"}).json()
    assert quiet["budget"] > 8_000 and client.get("/api/sessions/long/compactions").json() == []
    compiled = client.post("/api/sessions/long/context", json={"message": "hi", **small})
    assert compiled.status_code == 200 and compiled.json()["budget"] < 8_000
    assert len(client.get("/api/sessions/long/compactions").json()) == 1


def test_compaction_routes(client: TestClient) -> None:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 40}
             for i in range(60)]
    client.post("/api/sessions/long/events", json=turns)
    small = {"model": "gpt-4"}  # an 8k window: 60 long turns are well over the threshold
    dry = client.post("/api/sessions/long/compact", json={"dry_run": True, **small}).json()
    assert dry["dry_run"] is True and client.get("/api/sessions/long/compactions").json() == []
    done = client.post("/api/sessions/long/compact", json=small).json()
    assert done["archived"] > 0 and done["tokens_after"] < done["tokens_before"]
    assert len(client.get("/api/sessions/long/compactions").json()) == 1
    assert client.post("/api/sessions/long/compact", json={"strategy": "magic"}).status_code == 422


def test_memory_crud_history_read_and_search(client: TestClient) -> None:
    created = client.post("/api/memories", json={"content": "The deploy target is Fly.io",
                                                 "type": "project_context", "tags": ["ops"]})
    assert created.status_code == 201
    mid = created.json()["id"]
    assert client.get(f"/api/memories/{mid}").json()["tags"] == ["ops"]
    updated = client.put(f"/api/memories/{mid}", json={"content": "The deploy target is AWS",
                                                       "type": "project_context"})
    assert updated.json()["content"] == "The deploy target is AWS"
    history = client.get(f"/api/memories/{mid}/history").json()
    assert history[0]["content"] == "The deploy target is Fly.io"
    page = client.get(f"/api/memories/{mid}/read", params={"offset": 0, "limit": 5}).json()
    assert len(page["content"]) == 5 and page["next_offset"] == 5
    client.post("/api/memories", json={"content": "User prefers tea", "type": "user_preference"})
    hits = client.post("/api/search", json={"query": "deploy target"}).json()
    assert hits[0]["id"] == mid and 0 < hits[0]["relevance"] <= 1
    typed = client.post("/api/search", json={"query": "tea deploy", "types": ["user_preference"]})
    assert {h["type"] for h in typed.json()} == {"user_preference"}
    assert [m["id"] for m in client.get("/api/memories",
                                        params={"type": "project_context"}).json()] == [mid]
    assert client.delete(f"/api/memories/{mid}").status_code == 204
    gone = client.get(f"/api/memories/{mid}")
    assert gone.status_code == 404 and mid in error(gone)
    bad_type = client.post("/api/memories", json={"content": "x", "type": "Not a type!"})
    assert bad_type.status_code == 422


@pytest.mark.parametrize("query", ['"unbalanced', "a OR AND NOT", "x*) NEAR(", "'; DROP TABLE "
                                   "memories; --", "\x00", "é" * 5000])
def test_hostile_search_queries_are_text(client: TestClient, query: str) -> None:
    client.post("/api/memories", json={"content": "memories survive", "type": "sticky"})
    response = client.post("/api/search", json={"query": query})
    assert response.status_code in (200, 422), response.text
    assert client.get("/api/memories").json()[0]["content"] == "memories survive"


def test_state_routes(client: TestClient) -> None:
    assert client.put("/api/state/topic", json={"value": "tides"}).json()["value"] == "tides"
    client.put("/api/state/topic", json={"value": "moons"})
    assert [(s["key"], s["value"]) for s in client.get("/api/state").json()] == [
        ("topic", "moons")]
    assert client.get("/api/state/topic").json()["value"] == "moons"
    assert client.delete("/api/state/topic").status_code == 204
    assert client.get("/api/state/topic").status_code == 404
    assert client.delete("/api/state/topic").status_code == 404
    # A key may hold "/" (the CLI and the library take one): every route reaches it.
    assert client.put("/api/state/team/lead", json={"value": "Ana"}).status_code == 200
    assert client.get("/api/state/team/lead").json()["value"] == "Ana"
    assert client.delete("/api/state/team/lead").status_code == 204


def test_knowledge_routes(client: TestClient) -> None:
    put = client.put("/api/kb/doc", params={"path": "/projects/loci/db.md"},
                     json={"content": "# DB\nWe chose SQLite first.", "tags": ["decision"]})
    assert put.json()["status"] == "created"
    client.put("/api/kb/doc", params={"path": "/projects/loci/db.md"},
               json={"content": "# DB\nSQLite first, Postgres for teams."})
    doc = client.get("/api/kb/doc", params={"path": "/projects/loci/db.md"}).json()
    assert doc["version"] == 2 and doc["tags"] == ["decision"]
    assert client.get("/api/kb/history", params={"path": "/projects/loci/db.md"}).json()[0][
        "version"] == 1
    tree = client.get("/api/kb/tree").json()
    assert tree["count"] == 1 and tree["children"][0]["name"] == "projects/"
    hits = client.post("/api/kb/search", json={"query": "postgres teams"}).json()
    assert hits[0]["path"] == "/projects/loci/db.md"
    page = client.get("/api/kb/read", params={"path": "/projects/loci/db.md", "limit": 4})
    assert page.json()["content"] == "# DB"
    escape = client.put("/api/kb/doc", params={"path": "/../etc/passwd"}, json={"content": "x"})
    assert escape.status_code == 422
    assert client.delete("/api/kb/doc", params={"path": "/projects/loci/db.md"}).status_code \
        == 204
    assert client.get("/api/kb", params={"prefix": "/"}).json() == []


def test_skills_routes(client: TestClient, home: Path) -> None:
    (home / "skills").mkdir()
    (home / "skills" / "deploy.md").write_text(
        "---\nslug: deploy\nname: Deploying\ntriggers:\n  keywords: [deploy, release]\n---\n"
        "Run the checklist.\n")
    assert [s["slug"] for s in client.get("/api/skills").json()["skills"]] == ["deploy"]
    matched = client.post("/api/skills/match", json={"text": "time to deploy the release"})
    assert matched.json() == [{"slug": "deploy", "name": "Deploying", "score": 2}]


def test_oversized_bodies_get_413(client: TestClient) -> None:
    big = {"role": "user", "content": "x" * 70_000}
    response = client.post("/api/sessions/s/events", json=big)
    assert response.status_code == 413 and "64000" in error(response)

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
        yield b'{"role": "user", "content": "'
        for _ in range(10):
            yield b"y" * 10_000
        yield b'"}'

    streamed = client.post("/api/sessions/s/events", content=chunks(),
                           headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    assert client.get("/api/sessions").json() == []


def test_unknown_route_is_json_404(client: TestClient) -> None:
    response = client.get("/api/nothing-here")
    assert response.status_code == 404 and error(response)


def test_a_session_name_with_slashes_is_reachable(client: TestClient) -> None:
    for path in ("team/alpha", "a/b/c"):
        url = f"/api/sessions/{quote(path, safe='')}"
        assert client.post(f"{url}/events", json={"role": "user", "content": "hi"}
                           ).status_code == 201
        assert [e["content"] for e in client.get(f"{url}/events").json()] == ["hi"]
        assert client.get(url).json()["id"] == path
        assert client.post(f"{url}/context", json={"message": "x"}).status_code == 200
    assert {s["id"] for s in client.get("/api/sessions").json()} >= {"team/alpha", "a/b/c"}


def test_a_document_write_with_if_match_cannot_clobber(client: TestClient) -> None:
    where = {"path": "/notes/plan.md"}
    assert client.put("/api/kb/doc", params=where, headers={"If-Match": '""'},
                      json={"content": "v1"}).status_code == 200  # created: none was there
    read = client.get("/api/kb/doc", params=where)
    etag = read.headers["ETag"]
    assert etag == f'"{hashlib.sha256(b"v1").hexdigest()}"'
    ours = client.put("/api/kb/doc", params=where, headers={"If-Match": etag},
                      json={"content": "v2 (ours)"})
    assert ours.status_code == 200 and ours.headers["ETag"] != etag
    theirs = client.put("/api/kb/doc", params=where, headers={"If-Match": etag},
                        json={"content": "v2 (theirs, from the same read)"})
    assert theirs.status_code == 409 and "changed since it was read" in error(theirs)
    stale = client.put("/api/kb/doc", params=where, json={
        "content": "x", "expected_sha256": etag.strip('"')})
    assert stale.status_code == 409
    assert client.get("/api/kb/doc", params=where).json()["content"] == "v2 (ours)"


def test_the_api_docs_work_offline(client: TestClient) -> None:
    for page, script in (("/docs", "/docs-assets/swagger-ui-bundle.js"),
                         ("/redoc", "/docs-assets/redoc.standalone.js")):
        html = client.get(page)
        assert html.status_code == 200 and script in html.text, page
        assert "cdn.jsdelivr" not in html.text and "fonts.googleapis" not in html.text
        asset = client.get(script)
        assert asset.status_code == 200 and len(asset.content) > 100_000
    assert client.get("/docs-assets/swagger-ui.css").status_code == 200
