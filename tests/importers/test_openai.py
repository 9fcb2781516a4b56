"""OpenAI Chat Completions messages and Responses items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loci import Loci, ValidationError
from loci.importers import read_log
from tests.importers.conftest import CHAT_LIST, load, of_type

SESSION = "openai/sqlfluff__sqlfluff-2419"


def test_a_real_chat_session_keeps_every_call_and_result(loci: Loci) -> None:
    messages = load(CHAT_LIST)["messages"]
    report = loci.import_log("openai", str(CHAT_LIST))
    events = loci.events(SESSION)
    calls = [c for m in messages for c in m.get("tool_calls") or ()]
    results = [m for m in messages if m["role"] == "tool"]
    assert report.sessions[0].tool_calls == len(calls) > 10
    assert [e.tool_call_id for e in of_type(events, "tool_call")] == [c["id"] for c in calls]
    assert [e.args for e in of_type(events, "tool_call")] == [
        json.loads(c["function"]["arguments"]) for c in calls]
    assert [(e.tool_call_id, e.content) for e in of_type(events, "tool_result")] == [
        (m["tool_call_id"], m["content"]) for m in results]
    assert all(e.tool_name == "bash" for e in of_type(events, "tool_result"))


def test_messages_keep_their_roles_and_the_harness_s_own_record(loci: Loci) -> None:
    messages = load(CHAT_LIST)["messages"]
    loci.import_log("openai", str(CHAT_LIST))
    events = loci.events(SESSION)
    assert events[0].role == "system" and events[0].content == messages[0]["content"]
    assert events[1].role == "user" and events[1].content == messages[1]["content"]
    exit_record = next(m for m in messages if m["role"] == "exit")
    last = events[-1]
    assert last.role == "system" and last.metadata["original_role"] == "exit"
    assert last.content == exit_record["content"]


def test_importing_twice_changes_nothing(loci: Loci) -> None:
    first = loci.import_log("openai", str(CHAT_LIST))
    before = loci.events(SESSION)
    second = loci.import_log("openai", str(CHAT_LIST))
    assert first.added == len(before) > 0 and second.added == 0
    assert loci.events(SESSION) == before


def responses_items() -> list[dict[str, object]]:
    """A Responses conversation as the API documents its items."""
    return [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "You are a careful coding agent."}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Why does test_parse fail?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "call_a", "name": "shell",
         "arguments": "{\"command\": [\"pytest\", \"tests/test_parse.py\"]}"},
        {"type": "function_call_output", "call_id": "call_a",
         "output": "Exit code: 1\nWall time: 0.4 seconds\nOutput:\nValueError: bad date"},
        {"type": "custom_tool_call", "call_id": "call_b", "name": "apply_patch",
         "input": "*** Begin Patch\n*** Update File: parse.py\n*** End Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_b",
         "output": [{"type": "input_text", "text": "Success. Updated parse.py"}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "dateutil parse"}},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Fixed: the parser now accepts it."}]},
    ]


def test_responses_items_become_calls_results_and_messages(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"input": responses_items()[:-1],
                                "output": responses_items()[-1:]}))
    [session] = read_log("openai", path)
    kinds = [(e["type"], e.get("role"), e.get("tool_name")) for e in session.events]
    assert kinds == [
        ("message", "system", None), ("message", "user", None),
        ("tool_call", "assistant", "shell"), ("tool_result", "tool", "shell"),
        ("tool_call", "assistant", "apply_patch"), ("tool_result", "tool", "apply_patch"),
        ("tool_call", "assistant", "web_search"), ("message", "assistant", None)]
    call, failed, patch, patched = session.events[2:6]
    assert call["args"] == {"command": ["pytest", "tests/test_parse.py"]}
    assert failed["metadata"]["is_error"] is True and "ValueError" in failed["content"]
    assert patch["args"] == {"input": "*** Begin Patch\n*** Update File: parse.py\n"
                                      "*** End Patch"}
    assert patched["content"] == "Success. Updated parse.py"
    assert "is_error" not in patched["metadata"]


def test_a_jsonl_file_of_chat_messages(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in [
        {"role": "user", "content": "List the files"},
        {"role": "assistant", "content": "Listing.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "pwd", "arguments": ""}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c2", "content": "/src"},
    ]))
    [session] = read_log("openai", path, session="mine")
    assert session.name == "mine"
    texts = [(e["type"], e["content"]) for e in session.events]
    assert texts == [("message", "List the files"), ("tool_call", "Listing."),
                     ("tool_call", ""), ("tool_result", "a.py"), ("tool_result", "/src")]


@pytest.mark.parametrize("calls", [["not a call", {"id": "c1", "type": "function", "function": {
    "name": "ls", "arguments": "{}"}}], "not a list"])
def test_an_answer_s_text_is_kept_whatever_its_odd_tool_calls(tmp_path: Path,
                                                             calls: object) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in [
        {"role": "user", "content": "List the files"},
        {"role": "assistant", "content": "Listing them now.", "tool_calls": calls}]))
    [session] = read_log("openai", path, session="mine")
    assert "Listing them now." in [e["content"] for e in session.events]


def test_a_file_that_holds_no_messages_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"model": "gpt-5"}')
    with pytest.raises(ValidationError, match="expected a list"):
        read_log("openai", path)


def test_numbers_past_what_python_reads_are_a_clear_error(tmp_path: Path) -> None:
    """A number of over 4,300 digits is no JSON Python reads (a ValueError, not a
    JSONDecodeError); a time past the year 9999 is no time."""
    huge = tmp_path / "huge.json"
    huge.write_text('{"messages": [{"role": "user", "content": "x", "n": ' + "1" * 5_000
                    + "}]}")
    with pytest.raises(ValidationError, match="neither JSON nor JSONL"):
        read_log("openai", huge)
    far = tmp_path / "far.json"
    far.write_text(json.dumps({"messages": [{"role": "user", "content": "x",
                                             "created_at": 1e20}]}))
    [session] = read_log("openai", far)
    assert [(e["content"], "timestamp" in e) for e in session.events] == [("x", False)]


def test_another_log_of_the_same_file_name_is_refused_not_merged(
        loci: Loci, tmp_path: Path) -> None:
    """Two folders' ``chat.json`` name one session; the second one's first messages
    would be skipped as already there. Refused whole, it goes in with ``session``."""
    for folder, texts in (("a", ["hello", "from a"]), ("b", ["hi", "from b", "more"])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "chat.json").write_text(json.dumps(
            [{"role": "user", "content": text} for text in texts]))
    loci.import_log("openai", str(tmp_path / "a" / "chat.json"))
    with pytest.raises(ValidationError, match="another log"):
        loci.import_log("openai", str(tmp_path / "b" / "chat.json"))
    assert [e.content for e in loci.events("openai/chat")] == ["hello", "from a"]
    loci.import_log("openai", str(tmp_path / "b" / "chat.json"), session="openai/chat-b")
    assert [e.content for e in loci.events("openai/chat-b")] == ["hi", "from b", "more"]
