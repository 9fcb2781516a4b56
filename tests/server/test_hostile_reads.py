"""Hostile values in filters, numbers, headers and Loci's own state keys get a 4xx
naming the problem, never a 500, and leave what was stored readable (found by an
attack on a running server: each case here answered 500 before)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from loci import Loci

JSON = {"Content-Type": "application/json"}
SURROGATE = '"\\ud800"'  # valid JSON, but no valid Unicode text
INT64 = 2 ** 63
pytestmark = pytest.mark.real_clock

REFUSED = [
    ("POST", "/api/search", '{"query":"x","since":"0001-01-01T00:00:00"}', {}),
    ("POST", "/api/search", '{"query":"x","until":"0001-01-01T00:00:00+14:00"}', {}),
    ("POST", "/api/search", '{"query":"x","since":"9999-12-31T23:59:59-14:00"}', {}),
    ("POST", "/api/search", f'{{"query":"x","types":[{SURROGATE}]}}', {}),
    ("POST", "/api/search", f'{{"query":"x","tags":[{SURROGATE}]}}', {}),
    ("POST", "/api/kb/search", f'{{"query":"x","path_filter":"/a{SURROGATE[1:]}', {}),
    ("POST", "/api/sessions/s/context", f'{{"message":"x","model":{SURROGATE}}}', {}),
    ("POST", "/api/sessions/s/import", "1" * 5_000, {}),
    ("POST", "/api/usage", json.dumps({"session": "s", "model": "m", "usage": {
        "prompt_tokens": 10 ** 26}}), {}),
    ("POST", "/api/usage", json.dumps({"session": "s", "model": "m", "usage": {
        "prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": -1}}}), {}),
    ("POST", "/api/usage", '{"session":"s","model":"m","usage":{},"client_text":['
     f"{SURROGATE}]}}", {}),
    ("POST", "/api/memories", '{"content":"the user lives in Lisbon"}',
     {"headers": {"Origin": "http://[::1"}}),
    ("PUT", "/api/state/consolidation:pending", '{"value":"garbage"}', {}),
    ("PUT", "/api/state/focus:s", '{"value":"{}"}', {}),
    ("PUT", "/api/state/key%0A", '{"value":"v"}', {}),
]


@pytest.mark.parametrize(("method", "path", "body", "extra"), REFUSED)
def test_a_hostile_value_gets_a_4xx_and_stores_nothing(
        client: TestClient, home: Path, method: str, path: str, body: str,
        extra: dict[str, Any]) -> None:
    answer = client.request(method, path, content=body,
                            headers={**JSON, **extra.get("headers", {})})
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["message"]
    with Loci.open(store=f"sqlite:///{home / 'loci.db'}") as loci:
        assert loci.memories() == [] and loci.state() == []
        assert loci.usage.records() == []


def test_numbers_past_64_bits_on_paged_reads_and_redactions_are_refused(
        client: TestClient) -> None:
    for text in ("first", "second"):
        assert client.put("/api/kb/doc", params={"path": "/a/b.md"},
                          json={"content": text}).status_code in (200, 201)
    memory = client.post("/api/memories", json={"content": "the user lives in Lisbon",
                                                 "type": "sticky"}).json()
    huge = str(10 ** 20)
    pages = [client.get("/api/kb/read", params={"path": "/a/b.md", "offset": huge}),
             client.get(f"/api/memories/{memory['id']}/read", params={"offset": huge})]
    assert [p.status_code for p in pages] == [422, 422], [p.text for p in pages]
    gone = client.delete("/api/kb/history", params={"path": "/a/b.md",
                                                    "version": str(INT64)})
    assert gone.status_code == 404, gone.text
    # What was stored still reads back, the earlier version included.
    assert client.get("/api/kb/doc", params={"path": "/a/b.md"}).json()["content"] == "second"
    assert client.get("/api/kb/doc", params={"path": "/a/b.md", "version": 1}
                      ).json()["content"] == "first"
    assert client.get(f"/api/memories/{memory['id']}").status_code == 200


def test_usage_totals_stay_within_what_the_report_can_write(client: TestClient) -> None:
    big = {"prompt_tokens": INT64 - 1, "completion_tokens": INT64 - 1}
    for _ in range(3):
        answer = client.post("/api/usage", json={"session": "big", "model": "m",
                                                 "usage": big})
        assert answer.status_code == 422, answer.text
    most = {"prompt_tokens": 10 ** 12, "completion_tokens": 10 ** 12}
    for _ in range(3):
        assert client.post("/api/usage", json={"session": "big", "model": "m",
                                               "usage": most}).status_code == 201
    report = client.get("/api/usage")
    assert report.status_code == 200, report.text
    assert report.json()["totals"]["input_tokens"] == 3 * 10 ** 12


def test_a_damaged_pending_consolidation_reads_as_none(client: TestClient, home: Path
                                                       ) -> None:
    """A proposal stored by an older version that let clients write the key: the route
    answers as without one, and the next proposal replaces it."""
    broken = ["garbage", "{}", "[]", "null",
              json.dumps({"id": "p", "created_at": "2026-01-01T00:00:00Z",
                          "proposer": "rules", "changes": [
                              {"kind": "bogus", "ids": ["a"], "reason": "r", "seen": ["x"]}]}),
              json.dumps({"id": "p", "created_at": "2026-01-01T00:00:00Z",
                          "proposer": "rules", "changes": [
                              {"kind": "merge", "ids": [], "reason": "r"}]})]
    for value in broken:
        with Loci.open(store=f"sqlite:///{home / 'loci.db'}") as loci:
            loci.store.set_state(loci.scope, "consolidation:pending", value,
                                 loci.clock())
        pending = client.get("/api/memories/consolidation")
        assert pending.status_code in (200, 404), (value, pending.text)
        applied = client.post("/api/memories/consolidation/p/apply")
        assert applied.status_code == 404, (value, applied.text)
        with Loci.open(store=f"sqlite:///{home / 'loci.db'}") as loci:
            assert loci.store.get_state(loci.scope, "consolidation:pending") is not None
    made = client.post("/api/memories/consolidation")
    assert made.status_code in (200, 201), made.text
    assert client.get("/api/memories/consolidation").status_code == 200
