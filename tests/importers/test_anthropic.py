"""Anthropic Messages lists."""

from __future__ import annotations

import json
from pathlib import Path

from loci import Loci
from loci.importers import read_log
from tests.importers.conftest import MESSAGES_LIST, blocks, load, of_type

SESSION = "anthropic/cc-3af9b1a7"


def test_a_real_messages_list_keeps_every_call_and_result(loci: Loci) -> None:
    listed = load(MESSAGES_LIST)["messages"]
    loci.import_log("anthropic", str(MESSAGES_LIST))
    events = loci.events(SESSION)
    uses, results = blocks(listed, "tool_use"), blocks(listed, "tool_result")
    assert [(e.tool_call_id, e.tool_name, e.args) for e in of_type(events, "tool_call")] == [
        (b["id"], b["name"], b["input"]) for b in uses]
    assert [e.tool_call_id for e in of_type(events, "tool_result")] == [
        b["tool_use_id"] for b in results]
    assert [bool(e.metadata.get("is_error")) for e in of_type(events, "tool_result")] == [
        bool(b.get("is_error")) for b in results]


def test_importing_twice_changes_nothing(loci: Loci) -> None:
    first = loci.import_log("anthropic", str(MESSAGES_LIST))
    before = loci.events(SESSION)
    assert loci.import_log("anthropic", str(MESSAGES_LIST)).added == 0 < first.added
    assert loci.events(SESSION) == before


def test_a_request_body_keeps_its_system_and_leaves_thinking_out(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"system": [{"type": "text", "text": "Be brief."}],
                                "messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is in notes.md?"},
                                     {"type": "image", "source": {"type": "base64"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should read it.", "signature": "x"},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "t1", "name": "Read",
             "input": {"file_path": "notes.md"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
             "content": [{"type": "text", "text": "File does not exist."}]},
            {"type": "text", "text": "Try docs/notes.md"}]},
    ]}))
    [session] = read_log("anthropic", path)
    assert [(e["type"], e["role"], e["content"]) for e in session.events] == [
        ("message", "system", "Be brief."),
        ("message", "user", "What is in notes.md?\n[image]"),
        ("tool_call", "assistant", "Reading it."),
        ("tool_result", "tool", "File does not exist."),
        ("message", "user", "Try docs/notes.md")]
    assert session.events[3]["metadata"]["is_error"] is True
    assert session.events[3]["tool_name"] == "Read"


def test_a_session_whose_own_metadata_holds_an_import_id_of_another_kind_imports(
    loci: Loci,
) -> None:
    """A user's ``import_id`` that is no string (a list) names no imported event: the
    import neither fails on it nor skips anything for it."""
    loci.add_event(SESSION, type="message", role="user", content="mine",
                   metadata={"import_id": ["a", "list"]})
    assert loci.import_log("anthropic", str(MESSAGES_LIST)).added > 0
    assert loci.events(SESSION)[0].metadata == {"import_id": ["a", "list"]}
