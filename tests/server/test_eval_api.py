"""``loci eval`` over REST (``GET /api/sessions/{session}/eval``): the route's reports
are ``evaluate``'s on the same stored session, bad input is refused before any replay,
and a session is evaluated only in its own scope."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from loci import Loci
from loci.evaluation import BASELINES, CLASSES, evaluate
from loci.server.api_eval import ONE_REPLAY
from tests.importers.conftest import CHAT_LIST, load
from tests.server.conftest import make_key

SESSION = "agent/sqlfluff"
#: A real session cut short (its first messages): a replay of a few seconds.
MESSAGES = 40


def short_session(folder: Path, messages: int = MESSAGES) -> Path:
    """The first ``messages`` of a real mini-swe-agent session (Chat Completions
    messages) as a file ``loci import --format openai`` reads."""
    log = load(CHAT_LIST)
    path = folder / "short-session.json"
    path.write_text(json.dumps({**log, "messages": log["messages"][:messages]}))
    return path


def test_the_route_reports_what_evaluate_reports(client: TestClient, loci: Loci,
                                                 tmp_path: Path) -> None:
    loci.import_log("openai", str(short_session(tmp_path)), session=SESSION)
    before = client.get(f"/api/sessions/{SESSION}/events").json()
    response = client.get(f"/api/sessions/{SESSION}/eval",
                          params={"windows": "2000", "points": "1,0.5"})
    assert response.status_code == 200, response.text
    answer = response.json()
    [expected] = evaluate(loci, SESSION, [2000], [0.5, 1.0])
    [report] = answer["reports"]
    assert report.pop("compile_p50_ms") >= 0 and expected.pop("compile_p50_ms") >= 0
    assert report == expected and report["cuts"] == [0.5, 1.0]
    assert answer["classes"] == list(CLASSES) and answer["baselines"] == list(BASELINES)
    assert report["1.0|all|whole"] == 1.0 and report["1.0|tokens_mean"] < 2000
    assert client.get(f"/api/sessions/{SESSION}/events").json() == before  # only read


@pytest.mark.parametrize(("params", "fragment"), [
    ({"windows": "lots"}, "windows: expected comma-separated numbers"),
    ({"windows": "500"}, "a window is at least 1000 tokens"),
    ({"windows": "20000000"}, "at most 10,000,000 tokens"),
    ({"windows": "2000,3000,4000,5000"}, "windows: at most 3"),
    ({"points": "0,1"}, "fractions in (0, 1]"),
    ({"points": "nan"}, "fractions in (0, 1]"),
    ({"points": ",".join(str(n / 20) for n in range(1, 12))}, "points: at most 10"),
    ({"points": " , "}, "points: give at least one"),
])
def test_bad_windows_and_points_are_refused(client: TestClient, params: dict[str, str],
                                            fragment: str) -> None:
    assert client.post("/api/sessions/s/events", json={"role": "user",
                                                       "content": "hi"}).status_code == 201
    response = client.get("/api/sessions/s/eval", params=params)
    assert response.status_code == 422 and fragment in response.json()["error"]["message"]


def test_unknown_and_empty_sessions_are_4xx(client: TestClient) -> None:
    missing = client.get("/api/sessions/nowhere/eval", params={"windows": "2000"})
    assert missing.status_code == 404 and "no session 'nowhere'" in missing.text
    assert client.post("/api/sessions/quiet/events", json={
        "role": "assistant", "content": "Nobody asked me anything."}).status_code == 201
    quiet = client.get("/api/sessions/quiet/eval", params={"windows": "2000"})
    assert quiet.status_code == 422 and "no user message" in quiet.json()["error"]["message"]


def test_another_users_session_is_not_evaluated(client: TestClient) -> None:
    maya = {"X-Loci-User": "maya"}
    assert client.post("/api/sessions/private/events", headers=maya, json={
        "role": "user", "content": "Fix the failing test in parser.py"}).status_code == 201
    assert client.get("/api/sessions/private", headers=maya).status_code == 200
    assert client.get("/api/sessions/private/eval").status_code == 404
    bob = make_key(client.app.state.hub, "bob")  # type: ignore[attr-defined]
    as_bob = client.get("/api/sessions/private/eval",
                        headers={"Authorization": f"Bearer {bob}"})
    assert as_bob.status_code == 404 and "for user 'bob'" in as_bob.text


def test_one_replay_at_a_time(client: TestClient) -> None:
    with ONE_REPLAY:  # as while another request's replay runs
        busy = client.get("/api/sessions/nowhere/eval")
        assert busy.status_code == 429 and "replayed" in busy.json()["error"]["message"]
        assert client.get("/api/sessions/s/eval", params={"points": "2"}).status_code == 422
    assert client.get("/api/sessions/nowhere/eval").status_code == 404  # free again
