"""A REST body that is not sent as JSON is refused with what to send instead."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from loci import load_settings
from loci.server import create_app
from tests.server.conftest import LiveServer

BODY = b'{"type": "sticky", "content": "User is Maya"}'


@pytest.fixture
def base(tmp_path: Path, live_server: LiveServer) -> str:
    settings = load_settings(store=f"sqlite:///{tmp_path / 'x.db'}", home=str(tmp_path))
    return live_server(create_app(settings))


@pytest.mark.parametrize("kind", [None, "application/x-www-form-urlencoded", "text/plain"])
def test_a_body_without_the_json_type_is_a_415(base: str, kind: str | None) -> None:
    headers = {"content-type": kind} if kind else {}
    response = httpx.post(f"{base}/api/memories", content=BODY, headers=headers)
    assert response.status_code == 415
    message = response.json()["error"]["message"]
    assert "send the body as JSON with Content-Type: application/json" in message
    assert (kind or "no Content-Type") in message


def test_json_is_stored_and_a_bad_json_body_names_its_field(base: str) -> None:
    json_type = {"content-type": "application/json"}
    assert httpx.post(f"{base}/api/memories", content=BODY, headers=json_type
                      ).status_code == 201
    response = httpx.post(f"{base}/api/memories", content=b'{"type": "sticky"}',
                          headers=json_type)
    assert response.status_code == 422 and "body.content" in response.json()["error"]["message"]
