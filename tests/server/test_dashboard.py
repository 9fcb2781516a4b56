"""The dashboard end to end: a real uvicorn server over a fresh SQLite store, seeded
through the REST API, driven by Debian's headless Chromium through Playwright.

Screenshots of every view land in ``tests/artifacts/dashboard/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from playwright.sync_api import Page, expect

from loci import load_settings
from loci.server.app import create_app
from loci.server.dashboard import STATIC_DIR
from tests.server.conftest import LiveServer, chromium_path

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "dashboard"
XSS = '<img src=x onerror="window.__xss=1">'
# Small budgets so the inspector has a layer near its limit (sticky: 22 of 26 tokens)
# and one over it (memories drops items).
BUDGETS = {"sticky": 26, "memories": 30}


class ShiftedClock:
    """The real clock moved by ``offset``: lets the test write a fact in the past."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


@dataclass
class Site:
    url: str
    http: httpx.Client
    ids: dict[str, str]


def make_app(root: Path, clock: ShiftedClock | None = None) -> FastAPI:
    settings = load_settings(store=f"sqlite:///{root / 'loci.db'}", home=str(root),
                             workspace=str(root), context_budgets=BUDGETS,
                             compaction_preserve_messages=2, compaction_preserve_share=0.001)
    return create_app(settings, clock=clock or ShiftedClock())


def seed(http: httpx.Client, clock: ShiftedClock) -> dict[str, str]:
    """Memories of every type (one expired, one XSS payload), state, a compacted session
    and knowledge documents, all through the REST API."""
    def memory(kind: str, content: str, tags: list[str] | None = None) -> str:
        response = http.post("/api/memories", json={"type": kind, "content": content,
                                                     "tags": tags or []})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    clock.offset = -timedelta(days=40)
    ids = {"expired": memory("project_context", "Old deploy target was staging-1")}
    clock.offset = timedelta()
    ids |= {
        "name": memory("sticky", "User's name is John", ["identity"]),
        "bullets": memory("sticky", "Always answer in bullet points"),
        "short": memory("user_preference", "Prefers short answers", ["style"]),
        "project": memory("project_context", "Working on arvis-v3, a TypeScript agent runtime"),
        "pattern": memory("learned_pattern", "User codes in TypeScript"),
        "doomed": memory("learned_pattern", "Temporary note to delete"),
        "xss": memory("learned_pattern", XSS, ["<b>tag</b>"]),
    }
    assert http.put(f"/api/memories/{ids['short']}", json={
        "type": "user_preference", "content": "Prefers short answers, no preamble",
        "tags": ["style"]}).status_code == 200
    for key, value in [("last_price", "$142.30"), ("alert_threshold", "$150")]:
        assert http.put(f"/api/state/{key}", json={"value": value}).status_code == 200
    events: list[dict[str, Any]] = []
    for i in range(6):
        events += [
            {"role": "user", "content": f"question {i} about the deploy"},
            {"type": "tool_call", "role": "assistant", "tool_name": "web_search",
             "tool_call_id": f"c{i}", "args": {"q": f"deploy {i}"}},
            {"type": "tool_result", "role": "tool", "tool_call_id": f"c{i}",
             "content": "result " * 300},
            {"role": "assistant", "content": f"answer {i}"}]
    assert http.post("/api/sessions/deploy/events", json=events).status_code == 201
    assert http.post("/api/sessions/deploy/compact", json={}).json()["archived"] > 0
    for path, text in [("/profile/identity.md", "# Identity\nJohn, a TypeScript developer."),
                       ("/projects/arvis/notes.md", "# Arvis notes\nQueue and scheduler.")]:
        assert http.put("/api/kb/doc", params={"path": path},
                        json={"content": text}).status_code == 200
    return ids


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    clock = ShiftedClock()
    with LiveServer(make_app(tmp_path_factory.mktemp("dash"), clock)) as server, \
            httpx.Client(base_url=server.url, timeout=10) as http:
        yield Site(server.url, http, seed(http, clock))


def shoot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_missing_chromium_fails_and_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="`make browser` installs"):
        chromium_path(str(tmp_path / "chromium"))


def test_static_files_ship_without_cdn_and_do_not_shadow_the_api(site: Site) -> None:
    for file in STATIC_DIR.iterdir():
        # The SVG namespace is a name the DOM needs, not an address anything loads.
        text = file.read_text().replace("'http://www.w3.org/2000/svg'", "")
        assert "http://" not in text and "https://" not in text, file.name
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
            assert sink not in text, (file.name, sink)
    index = site.http.get("/")
    assert index.status_code == 200 and "<title>Loci dashboard</title>" in index.text
    assert "script-src 'self'" in index.headers["content-security-policy"]
    assert site.http.get("/app.js").headers["content-type"].startswith("text/javascript")
    assert site.http.get("/api/health").json()["status"] == "ok"
    assert site.http.get("/docs").status_code == 200
    missing = site.http.get("/no-such-page")
    assert missing.status_code == 404 and "error" in missing.json()


def test_overview_counts_the_callers_scope(site: Site) -> None:
    overview = site.http.get("/api/overview").json()
    assert overview["user"] == "default" and overview["auth"] == "open"
    assert overview["memories"]["sticky"] == 2 and overview["sessions"] == 1
    assert overview["documents"] == 2
    other = site.http.get("/api/overview", headers={"X-Loci-User": "bob"}).json()
    assert other["user"] == "bob" and other["memories"] == {} and other["sessions"] == 0


def test_memories_grouped_by_type_with_sticky_starred_and_expiry(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#memories")
    groups = page.locator("#memory-groups section.group")
    expect(groups).to_have_count(4)
    assert [g.get_attribute("data-type") for g in groups.all()] == [
        "sticky", "user_preference", "project_context", "learned_pattern"]
    sticky = page.locator(f"li[data-id='{site.ids['name']}']")
    expect(sticky.locator(".star")).to_have_text("★")
    expect(sticky).to_contain_text("never expires")
    expect(page.locator("#memory-groups .memory .star")).to_have_count(2)
    expires = site.http.get(f"/api/memories/{site.ids['short']}").json()["expires_at"]
    day = expires[:10]
    expect(page.locator(f"li[data-id='{site.ids['short']}'] .expiry")).to_contain_text(
        f"expires in 3 months · {day}")
    expect(page.locator(f"li[data-id='{site.ids['expired']}']")).to_have_count(0)
    expect(page.locator("[data-count='memories']")).to_have_text(str(len(site.ids) - 1))
    shoot(page, "memories")
    page.check("#include-expired")
    expired = page.locator(f"li[data-id='{site.ids['expired']}']")
    expect(expired).to_have_class("card memory expired")
    expect(expired.locator(".expiry")).to_contain_text("expired 10 days ago")
    shoot(page, "memories-expired")


def test_memory_history_and_search(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#memories")
    card = page.locator(f"li[data-id='{site.ids['short']}']")
    expect(card.locator(".card-head .content")).to_have_text("Prefers short answers, no preamble")
    card.get_by_role("button", name="History").click()
    expect(card.locator(".history .versions li")).to_have_count(1)
    expect(card.locator(".history")).to_contain_text("Prefers short answers")
    page.fill("#memory-query", "TypeScript")
    page.click("#memory-search button[type=submit]")
    results = page.locator("#search-results li.card")
    expect(results.first).to_be_visible()
    assert site.ids["pattern"] in [r.get_attribute("data-id") for r in results.all()]
    shoot(page, "memories-search")


def test_deleting_a_memory_removes_it_from_page_and_store(site: Site, page: Page) -> None:
    doomed = site.ids["doomed"]
    page.goto(f"{site.url}/#memories")
    messages: list[str] = []
    page.on("dialog", lambda dialog: (messages.append(dialog.message), dialog.accept()))
    page.locator(f"li[data-id='{doomed}']").get_by_role("button", name="Delete").click()
    expect(page.locator(f"li[data-id='{doomed}']")).to_have_count(0)
    assert "Temporary note to delete" in messages[0]
    assert site.http.get(f"/api/memories/{doomed}").status_code == 404


def test_markup_in_a_memory_is_shown_as_text(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#memories")
    card = page.locator(f"li[data-id='{site.ids['xss']}']")
    expect(card.locator(".content")).to_have_text(XSS)
    expect(card.locator(".tag")).to_have_text("<b>tag</b>")
    assert page.locator("main img, main b").count() == 0
    assert page.evaluate("window.__xss") is None


def test_state_pairs_show_and_delete(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#state")
    row = page.locator("tr[data-key='last_price']")
    expect(row.locator("td.value")).to_have_text("$142.30")
    expect(row).to_contain_text("UTC")
    shoot(page, "state")
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator("tr[data-key='alert_threshold']").get_by_role("button", name="Delete").click()
    expect(page.locator("tr[data-key='alert_threshold']")).to_have_count(0)
    assert site.http.get("/api/state/alert_threshold").status_code == 404


def test_a_sessions_events_and_compaction(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#sessions")
    link = page.locator("a[data-session='deploy']")
    expect(link).to_contain_text("25 events")
    link.click()
    expect(page).to_have_url(f"{site.url}/#sessions/deploy")
    expect(page.locator("#events tr.event")).to_have_count(25)
    expect(page.locator("#compactions li")).to_have_count(1)
    expect(page.locator("#compactions")).to_contain_text("events 1–20")
    expect(page.locator("#compactions")).to_contain_text("question 0 about the deploy")
    expect(page.locator("#events tr.archived")).to_have_count(20)
    expect(page.locator("#events tr.masked .badge.amber")).to_have_count(5)
    call = page.locator("#events tr[data-id='2']")
    expect(call).to_contain_text("web_search")
    expect(call).to_contain_text('{"q":"deploy 0"}')
    expect(page.locator("#events tr[data-id='25']")).to_contain_text("system")
    shoot(page, "session")


def test_a_session_longer_than_a_page_of_events_shows_them_all(
        tmp_path: Path, page: Page) -> None:
    """The API gives 10,000 events a call: a longer session's next ones come on demand
    (they were cut off unsaid); a bad escape in the address opens the default view."""
    with LiveServer(make_app(tmp_path)) as server, \
            httpx.Client(base_url=server.url, timeout=60) as http:
        events = [{"role": "user", "content": f"line {n}"} for n in range(10_050)]
        assert http.post("/api/sessions/long/events", json=events).status_code == 201
        page.goto(f"{server.url}/#sessions/long")
        expect(page.locator("#events tr.event")).to_have_count(10_000)
        page.click("#more-events")
        expect(page.locator("#events tr.event")).to_have_count(10_050)
        expect(page.locator("#events tr[data-id='10050']")).to_contain_text("line 10049")
        expect(page.locator("#more-events")).to_be_hidden()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{server.url}/#sessions/%E0%A4%A")
        expect(page.locator("#view-sessions")).to_be_visible()
        assert errors == []


def test_context_inspector_shows_budgets_and_warnings(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#sessions/deploy")
    page.click("#inspect-context")
    expect(page.locator("#context-session option")).to_have_count(1)
    expect(page.locator("#context-session")).to_have_value("deploy")
    page.fill("#context-message", "what is my name?")
    page.click("#context-form button[type=submit]")
    expected = site.http.post("/api/sessions/deploy/context",
                              json={"message": "what is my name?"}).json()
    expect(page.locator("#prefix-hash")).to_have_text(expected["prefix_hash"])
    sections = page.locator(".sections section")
    assert [s.get_attribute("data-section") for s in sections.all()] == [
        "static", "dynamic", "history", "retrieved", "message"]
    sticky = page.locator(".layer[data-layer='sticky']")
    expect(sticky).to_have_attribute("data-level", "warn")
    expect(sticky.locator(".tokens")).to_have_text("22 / 26 tokens · 85%")
    expect(sticky.locator(".bar.warn .fill")).to_be_visible()
    # Items show what they say, not only their ids.
    expect(sticky.locator(".included").first).to_contain_text("User's name is John")
    memories = page.locator(".layer[data-layer='memories']")
    expect(memories).to_have_attribute("data-level", "over")
    expect(memories.locator(".dropped").first).to_contain_text("over the memories budget")
    expect(page.locator(".layer .bar")).to_have_count(len(expected["layers"]))
    warnings = page.locator("#context-warnings")
    expect(warnings.locator(".warning.warn")).to_contain_text("dynamic/sticky at 85%")
    expect(warnings.locator(".warning.over").first).to_contain_text("dynamic/memories is full:")
    for text in expected["warnings"]:
        expect(warnings.locator(".warning.compiler", has_text=text)).to_have_count(1)
    expect(page.locator("#context-summary")).to_contain_text("window 128,000")
    shoot(page, "context")


def test_knowledge_tree_and_document(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#kb")
    tree = page.locator("#kb-tree")
    expect(tree.locator(".folder-name")).to_have_count(3)
    expect(tree).to_contain_text("profile/")
    tree.locator("button[data-path='/projects/arvis/notes.md']").click()
    expect(page.locator("#kb-doc h2")).to_have_text("Arvis notes")
    expect(page.locator("#kb-content")).to_have_text("# Arvis notes\nQueue and scheduler.")
    expect(page.locator("#kb-doc .meta")).to_contain_text("version 1")
    expect(page.locator("#kb-doc")).not_to_contain_text("null")
    shoot(page, "knowledge")


def test_user_selector_switches_scope_in_open_mode(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#memories")
    expect(page.locator("#memory-groups section.group").first).to_be_visible()
    page.fill("#user", "bob")
    page.click("#auth button[type=submit]")
    expect(page.locator("#memory-groups")).to_have_text("No memories yet.")
    expect(page.locator("#whoami")).to_have_text("bob · default · open mode")


def test_api_key_flow(tmp_path: Path, page: Page) -> None:
    """With a key in the store the page shows the server's 401 until the key is given."""
    app = make_app(tmp_path)
    key = app.state.hub.runtime.create_key("maya", "test")[1]
    with LiveServer(app) as server:
        auth = {"Authorization": f"Bearer {key}"}
        assert httpx.post(f"{server.url}/api/memories", headers=auth, json={
            "type": "sticky", "content": "Maya lives in Lisbon"}).status_code == 201
        page.goto(f"{server.url}/#memories")
        banner = page.locator("#error")
        expect(banner).to_be_visible()
        expect(banner).to_contain_text("401 AuthError: an API key is required")
        expect(page.locator("#memory-groups .memory")).to_have_count(0)
        shoot(page, "api-key-401")
        page.fill("#api-key", key)
        page.click("#auth button[type=submit]")
        expect(page.locator("#memory-groups .memory .content")).to_have_text("Maya lives in Lisbon")
        expect(banner).to_be_hidden()
        expect(page.locator("#whoami")).to_have_text("maya · default · API key")
        expect(page.locator("#user")).to_be_disabled()
        assert page.evaluate("localStorage.getItem('loci.apiKey')") == key
        shoot(page, "api-key-ok")
        page.close()



def test_erasing_a_session_asks_first_and_lists_what_came_from_it(
        site: Site, page: Page) -> None:
    assert site.http.post("/api/sessions/scratch/events",
                          json={"role": "user", "content": "My kayak is red."}).status_code == 201
    reply = site.http.post("/api/sessions/scratch/reply", json={
        "content": "Noted. [MEMORY:fact] The kayak is red. [/MEMORY]"}).json()
    derived = reply["saved"][0]["memory"]["id"]
    page.goto(f"{site.url}/#sessions/scratch")
    messages: list[str] = []
    page.once("dialog", lambda dialog: (messages.append(dialog.message), dialog.dismiss()))
    page.locator("#erase-session").click()
    for _ in range(300):  # the dialog opens once the listing came back
        if messages:
            break
        page.wait_for_timeout(100)
    expect(page.locator("#events tr.event")).to_have_count(2)  # dismissed: nothing erased
    assert "2 events" in messages[0] and f"memory {derived}" in messages[0]
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#erase-session").click()
    expect(page).to_have_url(f"{site.url}/#sessions")
    expect(page.locator("a[data-session='scratch']")).to_have_count(0)
    expect(page.locator("a[data-session='deploy']")).to_have_count(1)
    assert site.http.get("/api/sessions/scratch").status_code == 404
    assert site.http.get(f"/api/memories/{derived}").status_code == 404


def test_usage_chart_shows_cached_and_uncached_tokens_and_compactions(
        site: Site, page: Page) -> None:
    http = site.http
    events = [{"role": "user", "content": f"step {i}: " + "detail " * 200} for i in range(8)]
    assert http.post("/api/sessions/agent/events", json=events).status_code == 201
    calls = [(3000, 0), (3400, 2944), (2100, 0), (2500, 1920)]
    for n, (prompt, cached) in enumerate(calls):
        if n == 2:
            assert http.post("/api/sessions/agent/compact", json={}).json()["archived"] > 0
        assert http.post("/api/usage", json={
            "session": "agent", "model": "gpt-4o", "usage": {
                "prompt_tokens": prompt, "completion_tokens": 50,
                "prompt_tokens_details": {"cached_tokens": cached}}}).status_code == 201
    expected = http.get("/api/usage", params={"session": "agent"}).json()["totals"]
    page.goto(f"{site.url}/#usage/agent")
    figures = page.locator("#usage-session-figures")
    expect(figures.locator("[data-figure='calls'] dd")).to_have_text("4")
    expect(figures.locator("[data-figure='cache hits'] dd")).to_have_text(
        f"{round(100 * expected['hit_rate'])}%")
    expect(figures.locator("[data-figure='cost'] dd")).to_have_text(f"${expected['cost']:.4f}")
    expect(figures.locator("[data-figure='whole log, uncached'] dd")).to_have_text(
        f"${expected['full_cost']:.4f}")
    chart = page.locator("#usage-chart")
    cached = [int(r.get_attribute("data-tokens") or -1)
              for r in chart.locator(".cached").all()]
    uncached = [int(r.get_attribute("data-tokens") or -1)
                for r in chart.locator(".uncached").all()]
    assert cached == [c for _, c in calls] and uncached == [p - c for p, c in calls]
    # One compaction, before the third call.
    marks = chart.locator(".compaction")
    expect(marks).to_have_count(1)
    third = chart.locator(".cached").nth(2).get_attribute("data-call")
    assert marks.first.get_attribute("data-call") == third
    expect(page.locator(".usage-table tr[data-session='agent']")).to_have_class("selected")
    shoot(page, "usage")


def test_the_token_counter_follows_the_message_as_it_is_typed(site: Site, page: Page) -> None:
    page.goto(f"{site.url}/#context/deploy")
    expect(page.locator("#context-session")).to_have_value("deploy")
    page.locator("#context-message").press_sequentially("what is my name?", delay=10)
    expected = site.http.post("/api/sessions/deploy/context",
                              json={"message": "what is my name?"}).json()
    # No click: the counter compiled the next call on its own.
    expect(page.locator("#context-summary .big")).to_have_text(f"{expected['total_tokens']:,}")


def test_the_user_and_agent_fields_offer_the_stores_users_and_agents(
        site: Site, page: Page) -> None:
    assert site.http.put("/api/state/city", json={"value": "Porto"}, headers={
        "X-Loci-User": "omar", "X-Loci-Agent": "travel"}).status_code == 200
    page.goto(f"{site.url}/#state")
    users = page.locator("#known-users option")
    expect(users.first).to_be_attached()
    offered = [o.get_attribute("value") for o in users.all()]
    assert {"default", "omar"} <= set(offered)
    page.fill("#user", "omar")
    page.dispatch_event("#user", "change")
    # Omar's agents replace the default user's (the list is filled again on change).
    expect(page.locator("#known-agents option[value='travel']")).to_have_count(1)
    expect(page.locator("#known-agents option")).to_have_count(1)
    page.fill("#agent", "travel")
    page.click("#auth button[type=submit]")
    expect(page.locator("#whoami")).to_have_text("omar · travel · open mode")
    expect(page.locator("#state-table")).to_contain_text("Porto")


def test_a_person_adds_and_edits_memories_and_state(site: Site, page: Page) -> None:
    headers = {"X-Loci-User": "writer"}
    page.goto(f"{site.url}/#memories")
    page.fill("#user", "writer")
    page.click("#auth button[type=submit]")
    expect(page.locator("#whoami")).to_have_text("writer · default · open mode")
    page.fill("#memory-new", "Prefers tea to coffee")
    page.select_option("#memory-new-type", "user_preference")
    page.fill("#memory-new-tags", "drinks, taste")
    page.click("#memory-add button[type=submit]")
    card = page.locator("li.memory[data-type='user_preference']")
    expect(card.locator(".content")).to_have_text("Prefers tea to coffee")
    [stored] = site.http.get("/api/memories", headers=headers).json()
    assert stored["tags"] == ["drinks", "taste"]
    card.locator("button.edit").click()
    card.locator("textarea").fill("Prefers green tea to coffee")
    card.locator("form.editor button[type=submit]").click()
    expect(card.locator(".content")).to_have_text("Prefers green tea to coffee")
    history = site.http.get(f"/api/memories/{stored['id']}/history", headers=headers).json()
    assert [v["content"] for v in history] == ["Prefers tea to coffee"]

    page.goto(f"{site.url}/#state")
    page.fill("#state-key", "mood")
    page.fill("#state-value", "calm")
    page.click("#state-set button[type=submit]")
    row = page.locator("tr[data-key='mood']")
    expect(row.locator(".value")).to_have_text("calm")
    row.locator("button.edit").click()
    expect(page.locator("#state-key")).to_have_value("mood")
    page.fill("#state-value", "busy")
    page.click("#state-set button[type=submit]")
    expect(row.locator(".value")).to_have_text("busy")
    assert site.http.get("/api/state/mood", headers=headers).json()["value"] == "busy"


def test_a_person_creates_and_edits_documents_without_clobbering(
        site: Site, page: Page) -> None:
    headers = {"X-Loci-User": "author"}
    page.goto(f"{site.url}/#kb")
    page.fill("#user", "author")
    page.click("#auth button[type=submit]")
    page.fill("#kb-new-path", "/notes/trip.md")
    page.fill("#kb-new-content", "# Trip\nPorto in May.")
    page.click("#kb-new button[type=submit]")
    expect(page.locator("#kb-content")).to_have_text("# Trip\nPorto in May.")
    page.click("#kb-edit")
    page.fill("#kb-editor", "# Trip\nPorto in June.")
    page.click(".doc-editor button[type=submit]")
    expect(page.locator("#kb-content")).to_have_text("# Trip\nPorto in June.")
    history = site.http.get("/api/kb/history", params={"path": "/notes/trip.md"},
                            headers=headers).json()
    assert [v["content"] for v in history] == ["# Trip\nPorto in May."]
    # Someone saves a version while the page edits: the page's save is refused (409)
    # and the other version stays.
    page.click("#kb-edit")
    assert site.http.put("/api/kb/doc", params={"path": "/notes/trip.md"}, headers=headers,
                         json={"content": "# Trip\nLisbon instead."}).status_code == 200
    page.fill("#kb-editor", "# Trip\nPorto in July.")
    page.click(".doc-editor button[type=submit]")
    expect(page.locator("#error-text")).to_contain_text("409")
    assert site.http.get("/api/kb/doc", params={"path": "/notes/trip.md"},
                         headers=headers).json()["content"] == "# Trip\nLisbon instead."
