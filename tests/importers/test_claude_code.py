"""Claude Code's own session logs, read from a real project folder."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from loci import Loci
from loci.context.render import events_to_messages
from loci.importers import read_log
from loci.timeutil import parse_timestamp
from tests.importers.conftest import (
    CLAUDE_PROJECT,
    CLAUDE_SESSION,
    MESSAGES_LIST,
    blocks,
    load,
    of_type,
)

MAIN = "claude-code/3af9b1a7-6512-4883-ad18-320658ced099"
SUBAGENT = "claude-code/18240050-3ee8-41cd-a89a-0a5c4b709607/agent-a00ad96"


def raw_records() -> list[dict[str, object]]:
    records = []
    with gzip.open(CLAUDE_SESSION, "rt", encoding="utf-8") as handle:
        for line in handle:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # the owner's redaction cut some lines
    return records


def test_a_project_folder_keeps_every_tool_call_and_result(loci: Loci) -> None:
    report = loci.import_log("claude-code", str(CLAUDE_PROJECT))
    assert {s.session for s in report.sessions} == {MAIN, SUBAGENT}
    events = loci.events(MAIN)
    listed = load(MESSAGES_LIST)["messages"]
    uses, results = blocks(listed, "tool_use"), blocks(listed, "tool_result")
    assert len(uses) == 168
    calls = of_type(events, "tool_call")
    assert [c.tool_call_id for c in calls] == [b["id"] for b in uses]
    assert [c.args for c in calls] == [b["input"] for b in uses]
    assert sorted(r.tool_call_id or "" for r in of_type(events, "tool_result")) == sorted(
        b["tool_use_id"] for b in results)
    errors = [r for r in of_type(events, "tool_result") if r.metadata.get("is_error")]
    assert len(errors) == sum(bool(b.get("is_error")) for b in results) > 0
    by_id = {c.tool_call_id: c.tool_name for c in calls}
    assert all(r.tool_name == by_id[r.tool_call_id] for r in of_type(events, "tool_result"))


def test_the_assistant_s_words_and_the_user_s_are_all_kept(loci: Loci) -> None:
    loci.import_log("claude-code", str(CLAUDE_SESSION))
    held = "\n".join(e.content for e in loci.events(MAIN))
    listed = load(MESSAGES_LIST)["messages"]
    texts = [b["text"] for b in blocks(listed, "text")] + [
        m["content"] for m in listed if isinstance(m["content"], str)]
    assert texts and all(text.strip() in held for text in texts)


def test_timestamps_are_the_log_s_own(loci: Loci) -> None:
    loci.import_log("claude-code", str(CLAUDE_SESSION))
    events = loci.events(MAIN)
    stamps = {parse_timestamp(str(r["timestamp"])) for r in raw_records()
              if r.get("type") in ("user", "assistant")}
    assert all(e.timestamp in stamps for e in events)
    assert events[0].timestamp == min(stamps)


def test_the_compaction_summary_is_kept_as_one(loci: Loci) -> None:
    loci.import_log("claude-code", str(CLAUDE_SESSION))
    summaries = [e for e in loci.events(MAIN) if e.metadata.get("compact_summary")]
    assert len(summaries) == 1
    assert summaries[0].role == "user" and summaries[0].metadata["trigger"] == "auto"
    assert summaries[0].content.startswith("This session is being continued")


def test_a_streamed_reply_is_one_assistant_message(loci: Loci) -> None:
    """Claude Code logs parallel tool calls one record each: they are one reply."""
    loci.import_log("claude-code", str(CLAUDE_SESSION))
    rendered = events_to_messages(loci.events(MAIN))
    replies = {}
    for record in raw_records():
        message = record.get("message")
        if record.get("type") == "assistant" and isinstance(message, dict):
            uses = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
            replies.setdefault(message["id"], []).extend(uses)
    parallel = [ids for ids in replies.values() if len(ids) > 1]
    grouped = [[c["id"] for c in m["tool_calls"]] for m in rendered if m.get("tool_calls")]
    assert parallel and all(ids in grouped for ids in parallel)


def test_importing_twice_changes_nothing(loci: Loci, tmp_path: Path) -> None:
    first = loci.import_log("claude-code", str(CLAUDE_PROJECT))
    before = loci.events(MAIN)
    second = loci.import_log("claude-code", str(CLAUDE_PROJECT))
    assert first.added == len(before) + len(loci.events(SUBAGENT)) and second.added == 0
    assert second.skipped == first.added
    assert loci.events(MAIN) == before


def test_a_log_that_grew_adds_only_its_new_records(loci: Loci, tmp_path: Path) -> None:
    with gzip.open(CLAUDE_SESSION, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    partial = tmp_path / "3af9b1a7-6512-4883-ad18-320658ced099.jsonl"
    partial.write_text("\n".join(lines[:200]) + "\n")
    early = loci.import_log("claude-code", str(partial)).added
    shutil.copy(CLAUDE_SESSION, tmp_path / "whole.jsonl.gz")
    later = loci.import_log("claude-code", str(tmp_path / "whole.jsonl.gz"),
                            session=MAIN).sessions[0]
    assert early > 0 and later.skipped == early
    assert len(of_type(loci.events(MAIN), "tool_call")) == 168


def test_a_log_read_mid_reply_imports_the_rest_of_the_reply_later(
        loci: Loci, tmp_path: Path) -> None:
    """Claude Code logs a streamed reply a block per record, under one message id: a
    log read after its text and before its call imports the call when it comes (it
    was refused as another log's, for good), and a third import adds nothing."""
    def record(uuid: str, role: str, content: object, reply: str | None = None) -> str:
        message: dict[str, object] = {"role": role, "content": content}
        if reply:
            message["id"] = reply
        return json.dumps({"type": role, "uuid": uuid, "sessionId": "s1",
                           "timestamp": "2025-01-01T00:00:00Z", "message": message})
    log = tmp_path / "s1.jsonl"
    lines = [record("u1", "user", "please list files"),
             record("a1", "assistant", [{"type": "text", "text": "Listing."}], "msg_1")]
    log.write_text("\n".join(lines) + "\n")
    loci.import_log("claude-code", str(log))
    lines += [record("a2", "assistant", [{"type": "tool_use", "id": "t1", "name": "ls",
                                          "input": {}}], "msg_1"),
              record("u2", "user", [{"type": "tool_result", "tool_use_id": "t1",
                                     "content": "a.txt"}])]
    log.write_text("\n".join(lines) + "\n")
    assert loci.import_log("claude-code", str(log)).sessions[0].added == 2
    assert loci.import_log("claude-code", str(log)).sessions[0].added == 0
    assert [(e.type, e.content) for e in loci.events("claude-code/s1")] == [
        ("message", "please list files"), ("message", "Listing."), ("tool_call", ""),
        ("tool_result", "a.txt")]


def test_half_an_emoji_is_a_replacement_character_not_a_lost_folder(
        loci: Loci, tmp_path: Path) -> None:
    """A record whose text ends in half a surrogate pair (an emoji cut by JavaScript)
    is kept with U+FFFD in its place; the folder's other sessions import too."""
    for session in ("aaa", "bbb"):
        (tmp_path / f"{session}.jsonl").write_text(json.dumps({
            "type": "user", "uuid": f"{session}1", "sessionId": session,
            "timestamp": "2025-01-01T00:00:00Z",
            "message": {"role": "user", "content": f"{session} says hi"}}) + "\n")
    with (tmp_path / "aaa.jsonl").open("a") as log:
        log.write('{"type":"user","uuid":"aaa2","sessionId":"aaa","message":{"role":"user",'
                  '"content":"emoji cut \\ud83d, and \\ud83d\\ude00 whole"}}\n')
    loci.import_log("claude-code", str(tmp_path))
    assert [e.content for e in loci.events("claude-code/aaa")] == [
        "aaa says hi", "emoji cut \ufffd, and \U0001f600 whole"]
    assert [e.content for e in loci.events("claude-code/bbb")] == ["bbb says hi"]


def test_sidechains_in_the_session_file_are_sessions_of_their_own(tmp_path: Path) -> None:
    """Older Claude Code versions log a subagent's records in the session's own file."""
    def record(uuid: str, parent: str | None, kind: str, content: object,
               sidechain: bool = False) -> str:
        return json.dumps({"type": kind, "uuid": uuid, "parentUuid": parent,
                           "isSidechain": sidechain, "sessionId": "s1",
                           "timestamp": "2025-06-01T10:00:00Z",
                           "message": {"role": kind, "content": content}})
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join([
        record("u1", None, "user", "Find the config loader"),
        record("a1", "u1", "assistant", [{"type": "tool_use", "id": "t1", "name": "Task",
                                          "input": {"prompt": "search"}}]),
        record("x1", None, "user", "search", sidechain=True),
        record("x2", "x1", "assistant", "It is in cfg.py", sidechain=True),
        record("y1", None, "user", "second search", sidechain=True),
        record("x3", "x2", "user", "thanks", sidechain=True),
        record("r1", "a1", "user", [{"type": "tool_result", "tool_use_id": "t1",
                                     "content": "It is in cfg.py"}]),
    ]) + "\n")
    sessions = {s.name: s for s in read_log("claude-code", path)}
    assert set(sessions) == {"claude-code/s1", "claude-code/s1/sidechain-x1",
                             "claude-code/s1/sidechain-y1"}
    assert [e["content"] for e in sessions["claude-code/s1/sidechain-x1"].events] == [
        "search", "It is in cfg.py", "thanks"]
    assert [e["type"] for e in sessions["claude-code/s1"].events] == [
        "message", "tool_call", "tool_result"]


def test_lines_the_redaction_cut_are_counted_and_every_call_is_answered(loci: Loci) -> None:
    """The shipped log lost lines to its owner's redaction, some of them tool results:
    the report says how many lines were passed over, and the context answers each call
    whose result is gone, so that a provider accepts it."""
    with gzip.open(CLAUDE_SESSION, "rt", encoding="utf-8") as handle:
        lines = [line for line in handle if line.strip()]
    unreadable = len(lines) - len(raw_records())
    report = loci.import_log("claude-code", str(CLAUDE_SESSION))
    assert unreadable > 0 and [s.unreadable for s in report.sessions] == [unreadable]
    rendered = events_to_messages(loci.events(MAIN))
    calls = 0
    for position, message in enumerate(rendered):
        if not message.get("tool_calls"):
            continue
        following = []
        for after in rendered[position + 1:]:
            if after["role"] != "tool":
                break
            following.append(after["tool_call_id"])
        assert sorted(following) == sorted(c["id"] for c in message["tool_calls"])
        calls += len(following)
    assert calls == report.sessions[0].tool_calls


def test_line_and_paragraph_separators_inside_strings_keep_their_lines(
        loci: Loci, tmp_path: Path) -> None:
    """Node's ``JSON.stringify`` (Claude Code's writer) leaves U+2028, U+2029 and U+0085
    raw inside strings; a line is only ever ended by ``\\n``."""
    texts = ["one\u2028two", "three\u2029four", "five\u0085six"]
    records = [{"type": "user", "uuid": f"u{n}", "sessionId": "sep", "cwd": "/w",
                "timestamp": f"2026-01-01T00:00:0{n}Z",
                "message": {"role": "user", "content": text}}
               for n, text in enumerate(texts)]
    log = tmp_path / "sep.jsonl"
    log.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n",
                   encoding="utf-8")
    report = loci.import_log("claude-code", str(log))
    [count] = report.sessions
    assert count.unreadable == 0 and count.added == 3
    assert [e.content for e in loci.events(count.session)] == texts
