"""The dashboard of a scope that holds nothing says how to fill it."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.server.conftest import LiveServer
from tests.server.test_dashboard import make_app


def test_an_empty_scope_points_to_the_demo_and_the_importers(tmp_path: Path,
                                                              page: Page) -> None:
    with LiveServer(make_app(tmp_path)) as server:
        page.goto(f"{server.url}/#memories")
        hint = page.locator("#empty-hint")
        expect(hint).to_be_visible(timeout=30_000)
        expect(hint).to_contain_text("loci demo")
        expect(hint).to_contain_text("loci import --format claude-code")
        with httpx.Client(base_url=server.url) as http:
            assert http.post("/api/sessions/s/events", json=[
                {"role": "user", "content": "hello"}]).status_code == 201
        page.reload()
        expect(page.locator("#whoami")).to_contain_text("default")
        expect(hint).to_be_hidden(timeout=30_000)
