"""Values one backend accepts read back on both, and move between them: text holding
the characters ``\\u0000`` (no NUL), floats PostgreSQL's jsonb gives back as integers,
a text too large for PostgreSQL's full-text index (found by an attack on the backend)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from loci import Loci, ValidationError
from loci.server import create_app
from tests.conftest import settings_for

ESCAPE = 'clean = raw.replace("\\u0000", "")'


def test_text_holding_the_escape_of_a_nul_is_stored(engine: Loci) -> None:
    engine.add("s", "user", ESCAPE, note=ESCAPE)
    engine.remember(ESCAPE, type="sticky", tags=["code"])
    engine.state_set("snippet", ESCAPE)
    [event] = engine.events("s")
    assert event.content == ESCAPE and event.metadata == {"note": ESCAPE}
    assert [m.content for m in engine.memories()] == [ESCAPE]
    assert engine.state_get("snippet").value == ESCAPE


def test_floats_read_back_as_numbers_every_reader_can_write(
        request: pytest.FixtureRequest, store_url: str, tmp_path: Path) -> None:
    with Loci.open(store=store_url, home=str(tmp_path), embedding_provider="hash") as loci:
        loci.add("f", "user", "x", big=1e20, small=5e-324, whole=3.0)
        [event] = loci.events("f")
        assert event.metadata == {"big": 1e20, "small": 5e-324, "whole": 3.0}
        assert isinstance(event.metadata["big"], float)
        archive = loci.runtime.export_user(loci.scope.tenant)
        loci.runtime.erase_user(loci.scope.tenant)
        loci.runtime.import_user(archive)  # past 64 bits it was refused as an integer
        assert loci.events("f")[0].metadata["big"] == 1e20
    app = create_app(settings_for(request, store=store_url))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        listed = client.get("/api/sessions/f/events")
        assert listed.status_code == 200, listed.text
        assert listed.json()[0]["metadata"]["big"] == 1e20


@pytest.mark.backends("postgres")
def test_a_text_too_large_to_index_is_a_clear_error(engine: Loci) -> None:
    words = " ".join(f"id{n}" for n in range(150_000))  # over 1 MB of distinct words
    with pytest.raises(ValidationError, match="cannot index"):
        engine.add_event("big", type="tool_result", tool_name="t", content=words)
    engine.add("big", "user", "still writable")
    assert [e.content for e in engine.events("big")] == ["still writable"]
