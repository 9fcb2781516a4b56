"""The dashboard's consolidation review in Chromium: a proposal shown as a diff, the
memories untouched until Accept, then applied as new versions; a proposal the server
prepared is shown on opening the page."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from loci import Runtime
from tests.server.conftest import LiveServer
from tests.server.test_dashboard import make_app, shoot

QUESTION = "User: Can you suggest some unique events to attend in Amsterdam?"
COMMAND = "User: cd /usr/bin"
FACT = "I lead a team of 4 engineers in my new role as Senior Software Engineer."


def test_review_then_accept(page: Page, tmp_path: Path) -> None:
    with LiveServer(make_app(tmp_path)) as server, \
            httpx.Client(base_url=server.url, timeout=10) as http:
        ids = {text: http.post("/api/memories", json={"content": text}).json()["id"]
               for text in (QUESTION, COMMAND, FACT)}
        page.goto(f"{server.url}/#memories")
        expect(page.locator("#memory-groups .memory")).to_have_count(3)
        expect(page.locator("#consolidation")).to_be_empty()
        page.click("#consolidation-propose")
        changes = page.locator("#consolidation li.change")
        expect(changes).to_have_count(2)
        expect(page.locator("#consolidation")).to_contain_text(f"- {ids[QUESTION]}")
        expect(page.locator("#consolidation")).to_contain_text("a command line")
        shoot(page, "consolidation")
        assert len(http.get("/api/memories").json()) == 3  # nothing applied yet
        page.click("#consolidation-accept")
        expect(page.locator("#consolidation-done")).to_contain_text("Applied 2 retire")
        expect(page.locator("#memory-groups .memory")).to_have_count(1)
        assert [m["id"] for m in http.get("/api/memories").json()] == [ids[FACT]]
        history = http.get(f"/api/memories/{ids[QUESTION]}/history").json()
        assert history[0]["content"] == QUESTION


def test_a_prepared_proposal_is_shown(page: Page, tmp_path: Path) -> None:
    app = make_app(tmp_path)
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=10) as http:
        http.post("/api/memories", json={"content": QUESTION})
        runtime: Runtime = app.state.hub.runtime
        runtime.scope().consolidate()  # as the idle server does
        page.goto(f"{server.url}/#memories")
        expect(page.locator("#consolidation li.change")).to_have_count(1)
        expect(page.locator("#consolidation")).to_contain_text("a question")


def test_a_superseded_memory_is_marked(page: Page, tmp_path: Path) -> None:
    with LiveServer(make_app(tmp_path)) as server, \
            httpx.Client(base_url=server.url, timeout=10) as http:
        old = http.post("/api/memories", json={"content": "The user lives in Lisbon"}).json()
        new = http.post("/api/memories", json={"content": "The user lives in Porto now"}).json()
        page.goto(f"{server.url}/#memories")
        expect(page.locator("#memory-groups .memory")).to_have_count(1)
        page.check("#include-expired")
        badge = page.locator(f"li[data-id='{old['id']}'] .badge")
        expect(badge).to_have_text("superseded")
        assert badge.get_attribute("title") == f"superseded by {new['id']}"
