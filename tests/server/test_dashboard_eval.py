"""The dashboard's eval page in headless Chromium: from a stored session to its curve
(one SVG line per baseline, a point per point asked) and the table of the classes at
the last point, with ``evaluate``'s numbers; bad input and an empty store said as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from playwright.sync_api import Page, expect

from loci.evaluation import evaluate
from tests.server.conftest import LiveServer
from tests.server.test_dashboard import make_app, shoot
from tests.server.test_eval_api import SESSION, short_session

SERIES = ("loci", "tail_at_loci_tokens", "tail_at_history_budget")


def share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def test_the_eval_page_draws_the_curve_and_the_table(tmp_path: Path, page: Page) -> None:
    app = make_app(tmp_path)
    scope = app.state.hub.runtime.scope()
    scope.import_log("openai", str(short_session(tmp_path)), session=SESSION)
    [report] = evaluate(scope, SESSION, [2000], [0.5, 1.0])
    with LiveServer(app) as server:
        page.goto(f"{server.url}/#sessions/{quote(SESSION, safe='')}")
        page.click("#evaluate-session")
        expect(page.locator("#eval-session")).to_have_value(SESSION)
        page.fill("#eval-windows", "lots")
        page.click("#eval-run")
        expect(page.locator("#eval-error")).to_have_text(
            "422 ValidationError: windows: expected comma-separated numbers, got 'lots'")
        page.fill("#eval-windows", "2000")
        page.fill("#eval-points", "1, 0.5")
        page.click("#eval-run")
        expect(page.locator("#eval-loading")).to_be_visible()
        expect(page.locator("#eval-run")).to_be_disabled()
        block = page.locator(".eval-window[data-window='2000']")
        expect(block).to_be_visible(timeout=120_000)
        expect(page.locator("#eval-run")).to_be_enabled()
        check_chart(page, report)
        check_table(page, report)
        shoot(page, "eval")


def check_chart(page: Page, report: dict[str, Any]) -> None:
    chart = page.locator(".eval-window[data-window='2000'] svg")
    expect(chart.locator("g.series polyline")).to_have_count(len(SERIES))
    for name in SERIES:
        points = chart.locator(f"g.series[data-series='{name}'] circle")
        expect(points).to_have_count(2)
        drawn = [(float(p.get_attribute("data-cut") or "nan"),
                  float(p.get_attribute("data-value") or "nan")) for p in points.all()]
        assert drawn == [(cut, report[f"{cut}|all|{name}"]) for cut in (0.5, 1.0)]
        # Loci's line is drawn where its values put it: higher share, smaller y.
        line = chart.locator(f"g.series[data-series='{name}'] polyline")
        ys = [float(xy.split(",")[1]) for xy in (line.get_attribute("points") or "").split()]
        assert len(ys) == 2 and (ys[0] < ys[1]) == (drawn[0][1] > drawn[1][1])


def check_table(page: Page, report: dict[str, Any]) -> None:
    table = page.locator(".eval-table[data-window='2000']")
    for kind in ("files", "commands", "errors", "edits", "all"):
        row = table.locator(f"tr[data-class='{kind}']")
        for name in (*SERIES, "whole"):
            expect(row.locator(f"td[data-baseline='{name}']")).to_have_text(
                share(report[f"1.0|{kind}|{name}"]))
        expect(row.locator("td[data-baseline='found']")).to_have_text(
            share(report[f"missed_found|{kind}"]))
    figures = page.locator(".eval-window[data-window='2000'] .figures")
    expect(figures.locator("[data-figure=\"Loci's tokens at 100%\"] dd")).to_have_text(
        f"{report['1.0|tokens_mean']:,}")
    expect(figures.locator("[data-figure='fewer than the whole transcript'] dd")).to_have_text(
        share(report["1.0|reduction"]))


def test_an_empty_store_says_to_import_a_session_first(tmp_path: Path, page: Page) -> None:
    with LiveServer(make_app(tmp_path)) as server:
        page.goto(f"{server.url}/#eval")
        expect(page.locator("#eval-result")).to_contain_text("loci import --format claude-code")
        expect(page.locator("#eval-run")).to_be_disabled()
