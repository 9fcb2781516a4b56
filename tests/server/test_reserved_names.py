"""The one name rule at the server's doors: ``X-Loci-User``/``X-Loci-Agent`` headers
and the proxy's session (header or ``user`` field) are refused, before the upstream
is called, when they are reserved (``*``) or a path (a session may hold ``/`` between
parts that are no path steps); an operator key is the only way
to act for another user."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from fastapi.testclient import TestClient

from loci import load_settings
from loci.server import create_app
from tests.server.conftest import LOCAL, LiveServer, make_key
from tests.server.fake_upstream import Upstream, client, proxy_app

BAD = ["*", "..", "a/b", "../../etc"]
#: A session may hold "/" ("team/alpha"), not a path step.
BAD_SESSIONS = ["*", "..", "../../etc", "a//b"]


@pytest.mark.parametrize("name", BAD)
def test_scope_headers_refuse_reserved_names_and_paths(home: Path, name: str) -> None:
    app = create_app(load_settings(store=f"sqlite:///{home / 'loci.db'}"))
    with TestClient(app, base_url=LOCAL) as http:
        for header in ("X-Loci-User", "X-Loci-Agent"):
            answer = http.get("/api/memories", headers={header: name})
            assert answer.status_code == 422, (header, answer.text)
        key = make_key(app.state.hub, "alice")
        as_operator = http.get("/api/memories", headers={
            "Authorization": f"Bearer {key}", "X-Loci-User": name})
        assert as_operator.status_code in (403, 422)


@pytest.mark.parametrize(("name", "session"), list(zip(BAD, BAD_SESSIONS, strict=True)))
def test_the_proxy_refuses_them_before_calling_the_upstream(
        home: Path, upstream: Upstream, live_server: LiveServer, name: str,
        session: str) -> None:
    base = live_server(proxy_app(home, upstream))
    with client(base) as oai:
        with pytest.raises(openai.UnprocessableEntityError):
            oai.chat.completions.create(model="m", user=session, messages=[
                {"role": "user", "content": "hi"}])
        with pytest.raises(openai.UnprocessableEntityError):
            oai.chat.completions.create(
                model="m", extra_headers={"X-Loci-Session": session},
                messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.UnprocessableEntityError):
            oai.chat.completions.create(
                model="m", user="s", extra_headers={"X-Loci-User": name},
                messages=[{"role": "user", "content": "hi"}])
    assert upstream.requests == []
