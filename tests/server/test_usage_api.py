"""The usage report over REST and the CLI: per session and per call, priced, time ranges,
bad input refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from loci.cli.app import main

pytestmark = pytest.mark.real_clock
CALL = {"session": "s", "model": "gpt-4o", "latency_ms": 120.0,
        "client_text": ["You are terse."],
        "usage": {"prompt_tokens": 3000, "completion_tokens": 40,
                  "prompt_tokens_details": {"cached_tokens": 2048}}}


def test_calls_recorded_over_rest_are_reported_and_priced(client: TestClient) -> None:
    client.post("/api/sessions/s/events", json={"role": "user", "content": "hello " * 500})
    assert client.post("/api/usage", json=CALL).json()["cached_tokens"] == 2048
    assert client.post("/api/usage", json={**CALL, "model": "mystery"}).status_code == 201
    report = client.get("/api/usage", params={"session": "s"}).json()
    assert [c["model"] for c in report["calls"]] == ["gpt-4o", "mystery"]
    assert report["calls"][0]["log_tokens"] > 500 and report["calls"][0]["latency_ms"] == 120
    assert report["unpriced"] == ["mystery"] and report["totals"]["cost"] is None
    overview = client.get("/api/usage").json()
    assert overview["calls"] == [] and overview["sessions"][0]["session"] == "s"
    assert overview["totals"]["hit_rate"] == pytest.approx(4096 / 6000)
    later = client.get("/api/usage", params={"since": "2999-01-01T00:00:00Z"}).json()
    assert later["totals"]["calls"] == 0


@pytest.mark.parametrize(("method", "kwargs", "fragment"), [
    ("GET", {"params": {"since": "yesterday"}}, "ISO 8601"),
    ("GET", {"params": {"session": "../x" * 80}}, "session"),
    ("POST", {"json": {**CALL, "model": ""}}, "model"),
    ("POST", {"json": {**CALL, "latency_ms": -5}}, "latency_ms"),
    ("POST", {"json": {**CALL, "usage": "lots"}}, "usage"),
    ("POST", {"json": {**CALL, "usage": {"prompt_tokens": 1.5}}}, "prompt_tokens"),
    ("POST", {"json": {**CALL, "usage": {"prompt_tokens": "100"}}}, "prompt_tokens"),
    ("POST", {"json": {**CALL, "usage": {"input_tokens": 10, "output_tokens": 2.0}}},
     "output_tokens"),
])
def test_bad_usage_requests_are_refused(client: TestClient, method: str,
                                        kwargs: dict[str, object], fragment: str) -> None:
    response = client.request(method, "/api/usage", **kwargs)  # type: ignore[arg-type]
    assert 400 <= response.status_code < 500 and fragment in response.text
    assert client.get("/api/usage").json()["totals"]["calls"] == 0


def test_loci_usage_prints_sessions_calls_and_json(
        client: TestClient, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    client.post("/api/usage", json=CALL)
    store = ["--store", f"sqlite:///{home / 'loci.db'}"]
    assert main(["usage", *store]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[1].startswith("s ") and "68% from the cache" in table
    assert main(["usage", "s", *store]) == 0
    assert "gpt-4o" in capsys.readouterr().out
    assert main(["usage", "s", "--json", *store]) == 0
    assert '"cached_tokens": 2048' in capsys.readouterr().out
    assert main(["usage", "--since", "soon", *store]) == 2
    assert "ISO 8601" in capsys.readouterr().err
