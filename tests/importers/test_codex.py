"""Codex rollouts, in the current ``{timestamp, type, payload}`` form and the older one."""

from __future__ import annotations

import json
from pathlib import Path

from loci import Loci
from loci.importers import read_log
from loci.timeutil import parse_timestamp

SESSION_ID = "0199a1b2-7c3d-7e4f-8a5b-6c7d8e9f0a1b"


def line(stamp: str, kind: str, payload: dict[str, object]) -> str:
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload})


def rollout(folder: Path) -> Path:
    """A rollout as Codex writes one under ~/.codex/sessions/YYYY/MM/DD/."""
    day = folder / "2025" / "10" / "02"
    day.mkdir(parents=True)
    path = day / f"rollout-2025-10-02T09-15-00-{SESSION_ID}.jsonl"
    shell = {"type": "function_call", "name": "shell", "call_id": "call_1",
             "arguments": json.dumps({"command": ["bash", "-lc", "pytest -x"],
                                      "workdir": "/repo"})}
    path.write_text("\n".join([
        line("2025-10-02T09:15:00.100Z", "session_meta", {
            "id": SESSION_ID, "timestamp": "2025-10-02T09:15:00.000Z", "cwd": "/repo",
            "originator": "codex_cli_rs", "cli_version": "0.42.0"}),
        line("2025-10-02T09:15:00.200Z", "response_item", {
            "type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "<environment_context>\n  <cwd>/repo</cwd>\n"
                                               "</environment_context>"}]}),
        line("2025-10-02T09:15:01.000Z", "response_item", {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Make the test suite pass"}]}),
        line("2025-10-02T09:15:01.010Z", "event_msg", {
            "type": "user_message", "message": "Make the test suite pass", "kind": "plain"}),
        line("2025-10-02T09:15:01.020Z", "turn_context", {
            "cwd": "/repo", "model": "gpt-5-codex", "approval_policy": "on-request"}),
        line("2025-10-02T09:15:03.000Z", "response_item", {
            "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
        line("2025-10-02T09:15:04.000Z", "response_item", shell),
        line("2025-10-02T09:15:09.000Z", "response_item", {
            "type": "function_call_output", "call_id": "call_1", "output": json.dumps({
                "output": "FAILED tests/test_io.py::test_read - KeyError: 'path'",
                "metadata": {"exit_code": 1, "duration_seconds": 4.2}})}),
        line("2025-10-02T09:15:09.500Z", "event_msg", {
            "type": "token_count", "info": None}),
        line("2025-10-02T09:15:12.000Z", "compacted", {
            "message": "The user asked to fix the suite; test_read fails on a KeyError."}),
        line("2025-10-02T09:15:15.000Z", "response_item", {
            "type": "custom_tool_call", "status": "completed", "call_id": "call_2",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** Update File: io.py\n@@\n-x\n+y\n*** End Patch"}),
        line("2025-10-02T09:15:16.000Z", "response_item", {
            "type": "custom_tool_call_output", "call_id": "call_2",
            "output": "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nSuccess."}),
        line("2025-10-02T09:15:20.000Z", "response_item", {
            "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "The suite passes now."}]}),
        '{"timestamp":"2025-10-02T09:15:21.000Z","type":"response_item","payl',
    ]) + "\n")
    return path


def test_a_rollout_keeps_calls_results_errors_and_the_compaction(tmp_path: Path) -> None:
    [session] = read_log("codex", rollout(tmp_path))
    assert session.name == f"codex/{SESSION_ID}"
    kinds = [(e["type"], e.get("tool_name")) for e in session.events]
    assert kinds == [("message", None), ("message", None), ("tool_call", "shell"),
                     ("tool_result", "shell"), ("message", None),
                     ("tool_call", "apply_patch"), ("tool_result", "apply_patch"),
                     ("message", None)]
    call, failed, summary, _, patched = session.events[2:7]
    assert call["args"]["command"] == ["bash", "-lc", "pytest -x"]
    assert call["timestamp"] == parse_timestamp("2025-10-02T09:15:04Z")
    assert failed["metadata"]["is_error"] is True and failed["content"].startswith("FAILED")
    assert summary["metadata"]["compact_summary"] is True and summary["role"] == "user"
    assert "is_error" not in patched["metadata"]


def test_a_sessions_folder_imports_once(loci: Loci, tmp_path: Path) -> None:
    rollout(tmp_path / "sessions")
    first = loci.import_log("codex", str(tmp_path / "sessions"))
    again = loci.import_log("codex", str(tmp_path / "sessions"))
    events = loci.events(f"codex/{SESSION_ID}")
    assert first.added == len(events) == 8 and again.added == 0 and again.skipped == 8
    assert sum(e.type == "tool_call" for e in events) == sum(
        e.type == "tool_result" for e in events) == 2


def test_an_older_rollout_without_the_wrapper(tmp_path: Path) -> None:
    path = tmp_path / "rollout-2025-07-01T10-00-00-old.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "old-session", "timestamp": "2025-07-01T10:00:00.000Z",
         "instructions": None, "git": {"branch": "main"}},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                          "text": "run ls"}]},
        {"type": "function_call", "name": "shell", "call_id": "c9",
         "arguments": "{\"command\":[\"ls\"]}"},
        {"type": "function_call_output", "call_id": "c9",
         "output": "{\"output\":\"a.py\\n\",\"metadata\":{\"exit_code\":0}}"},
    ]) + "\n")
    [session] = read_log("codex", path)
    assert session.name == "codex/old-session"
    assert [(e["type"], e["content"]) for e in session.events] == [
        ("message", "run ls"), ("tool_call", ""), ("tool_result", "a.py\n")]
