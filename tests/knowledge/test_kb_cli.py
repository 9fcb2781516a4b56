"""``loci kb ...`` and ``loci session end`` end to end."""

from __future__ import annotations

import io
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loci import Loci
from loci.cli.app import main
from loci.timeutil import format_timestamp


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_kb_commands(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    note = tmp_path / "identity.md"
    note.write_text("---\ntitle: Who I am\ntags: [me]\n---\nMaya, backend engineer.\n")
    code, out, _ = run(capsys, "kb", "put", "/profile/identity.md", str(note))
    assert code == 0 and out.startswith("created /profile/identity.md (version 1")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(
        b"Maya, backend engineer in Lisbon.\n")))
    code, out, _ = run(capsys, "kb", "put", "/profile/identity.md", "-", "--tags", "me,bio")
    assert code == 0 and out.startswith("updated /profile/identity.md (version 2")
    assert run(capsys, "kb", "get", "/profile/identity.md")[1] == (
        "Maya, backend engineer in Lisbon.\n")
    assert run(capsys, "kb", "get", "/profile/identity.md", "--version", "1")[1] == (
        "Maya, backend engineer.\n")
    document = json.loads(run(capsys, "kb", "get", "/profile/identity.md", "--json")[1])
    assert document["tags"] == ["me", "bio"] and document["metadata"] == {"title": "Who I am"}
    history = run(capsys, "kb", "history", "/profile/identity.md")[1].splitlines()
    assert history[0].startswith("v2   now") and history[1].startswith("v1   (")
    assert len(json.loads(run(capsys, "kb", "history", "/profile/identity.md", "--json")[1])[
        "versions"]) == 1
    assert run(capsys, "kb", "redact", "/profile/identity.md", "--version", "1") == (
        0, "redacted /profile/identity.md v1\n", "")
    assert run(capsys, "kb", "get", "/profile/identity.md", "--version", "1")[1].strip() == ""
    assert run(capsys, "kb", "redact", "/profile/identity.md", "--version", "2")[0] == 2

    docs = tmp_path / "docs"
    (docs / "ops").mkdir(parents=True)
    (docs / "ops" / "runbook.md").write_text("---\ntags: [ops]\n---\nRestart the tide worker.")
    (docs / "tides.txt").write_text("Tide tables for station 9414290.")
    (docs / "bad.md").write_bytes(b"\xff\xfe")
    code, out, err = run(capsys, "kb", "import", str(docs), "--prefix", "/reference/")
    assert code == 0 and "imported 2 documents into /reference/ (2 new" in out
    assert "skipped bad.md: not UTF-8 text" in out and "importing" in err
    tree = run(capsys, "kb", "ls")[1].splitlines()
    assert tree[0] == "/ (3 documents)" and "├── profile/" in tree
    assert any("└── runbook.md  v1" in line for line in tree)
    listed = json.loads(run(capsys, "kb", "ls", "/reference", "--json")[1])
    assert [d["path"] for d in listed] == ["/reference/ops/runbook.md", "/reference/tides.txt"]

    code, out, _ = run(capsys, "kb", "search", "tide worker", "--path", "/reference/",
                       "--tags", "ops")
    assert code == 0 and out.split()[1] == "/reference/ops/runbook.md"
    found = json.loads(run(capsys, "kb", "search", "station", "--json", "--limit", "1")[1])
    assert [r["path"] for r in found] == ["/reference/tides.txt"]
    assert run(capsys, "kb", "search", "station", "--path", "/profile/")[1] == "no results\n"

    assert run(capsys, "kb", "rm", "/reference/tides.txt")[1] == "removed /reference/tides.txt\n"
    for args, message in (
        (("kb", "get", "/reference/tides.txt"), "error: no document '/reference/tides.txt'"),
        (("kb", "get", "../etc/passwd"), "error: invalid document path '../etc/passwd'"),
        (("kb", "put", "/a//b.md", str(note)), "empty segment"),
        (("kb", "ls", "relative"), "error: invalid folder 'relative'"),
        (("kb", "search", "x", "--tags", "a" * 70), "error: invalid tag"),
        (("kb", "import", str(note)), "is a file"),
        (("kb", "history", "/nope.md"), "error: no document '/nope.md'"),
    ):
        code, _, err = run(capsys, *args)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, args


def test_session_end(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "add", "work", "user", "I'm Maya, a backend engineer. I prefer short answers.")
    run(capsys, "add", "work", "user", "We decided to use SQLite for the first release.")
    code, out, _ = run(capsys, "session", "end", "work")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("wrote /conversations/") and "1 decision" in lines[0]
    assert "updated /profile/identity.md (+1 line)" in lines
    assert "updated /profile/preferences.md (+1 line)" in lines
    assert lines[-1].startswith("memories: 3 new")
    again = json.loads(run(capsys, "session", "end", "work", "--json")[1])
    assert again["profile"] == {} and again["path"].startswith("/conversations/")
    code, _, err = run(capsys, "session", "end", "ghost")
    assert code == 2 and "no session 'ghost'" in err


def test_kb_put_takes_the_file_s_front_matter_as_the_document_s(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A title left out and ``tags: []`` clear them; a file without front matter keeps
    what the document had."""
    note = tmp_path / "note.md"
    note.write_text("---\ntitle: Secret plan\ntags: [a]\n---\nv1\n")
    run(capsys, "kb", "put", "/p/a.md", str(note))
    note.write_text("---\ntags: []\n---\nv2\n")
    run(capsys, "kb", "put", "/p/a.md", str(note))
    with Loci.open(store=f"sqlite:///{home / 'loci.db'}") as loci:
        cleared = loci.knowledge.get("/p/a.md")
    assert (cleared.content, cleared.tags, cleared.metadata) == ("v2\n", (), {})
    note.write_text("---\ntitle: Plan\ntags: [b]\n---\nv3\n")
    run(capsys, "kb", "put", "/p/a.md", str(note))
    note.write_text("v4, no front matter\n")
    run(capsys, "kb", "put", "/p/a.md", str(note))
    with Loci.open(store=f"sqlite:///{home / 'loci.db'}") as loci:
        kept = loci.knowledge.get("/p/a.md")
    assert (kept.tags, kept.metadata) == (("b",), {"title": "Plan"})


def test_kb_restore_a_document_and_a_folder(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    note = tmp_path / "note.md"
    note.write_text("First plan.\n")
    run(capsys, "kb", "put", "/plans/a.md", str(note))
    time.sleep(1.1)  # the CLI runs on the wall clock; times are kept to the microsecond
    middle = format_timestamp(datetime.now(UTC))
    time.sleep(0.1)
    note.write_text("Second plan.\n")
    run(capsys, "kb", "put", "/plans/a.md", str(note))
    run(capsys, "kb", "put", "/plans/b.md", str(note))  # created after `middle`
    code, out, _ = run(capsys, "kb", "restore", "/plans/", "--at", middle)
    assert code == 0 and "/plans/a.md: updated as v3" in out
    assert "restored 1 of 2 documents" in out
    assert "First plan." in run(capsys, "kb", "get", "/plans/a.md")[1]
    assert run(capsys, "kb", "restore", "/plans/b.md", "--at", middle)[0] != 0
