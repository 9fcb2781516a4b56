"""Mistaken or hostile input on the command line: one line naming the problem and exit
code 2, never a traceback, and what was stored reads back (each case here crashed or
lost data before)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from loci import Loci
from loci.cli.app import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def stored(home: Path) -> Loci:
    return Loci.open(store=f"sqlite:///{home / 'loci.db'}")


def test_an_export_with_line_separators_imports_again(
        home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    texts = ["a\u2028b", "c\u2029d", "e\u0085f"]
    for text in texts:
        assert run(capsys, "add", "s", "user", text)[0] == 0
    out = tmp_path / "s.jsonl"
    assert run(capsys, "export", "s", "-o", str(out))[0] == 0
    code, printed, err = run(capsys, "import", str(out), "--session", "copy")
    assert code == 0, err
    assert "imported 3 events into copy" in printed
    with stored(home) as loci:
        assert [e.content for e in loci.events("copy")] == texts


@pytest.mark.parametrize("log_format", ["jsonl", "openai", "claude-code", "codex"])
def test_a_file_that_is_not_utf8_is_a_clear_error(
        home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, log_format: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type":"message","role":"user","content":"\xff"}\n')
    args = ["import", str(bad)] + ([] if log_format == "jsonl" else ["--format", log_format])
    code, _, err = run(capsys, *args)
    assert code == 2 and "UTF-8" in err and "Traceback" not in err


def test_a_log_cut_short_in_its_gzip_is_a_clear_error(
        home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    whole = gzip.compress(json.dumps([{"role": "user", "content": "x" * 5_000}]).encode())
    half = tmp_path / "half.json.gz"
    half.write_bytes(whole[: len(whole) // 2])
    code, _, err = run(capsys, "import", "--format", "openai", str(half))
    assert code == 2 and "gzip" in err, err


def test_settings_that_are_not_utf8_are_a_clear_error(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "loci.toml").write_bytes(b'model = "\xff"\n')
    code, _, err = run(capsys, "status")
    assert code == 2 and "loci.toml" in err, err


@pytest.mark.parametrize("days", ["nan", "inf", "1e300", "1e9"])
def test_retention_past_a_date_is_refused(
        home: Path, capsys: pytest.CaptureFixture[str], days: str) -> None:
    assert run(capsys, "add", "s", "user", "kept")[0] == 0
    code, _, err = run(capsys, "purge", "--older-than", days)
    assert code == 2 and err.startswith("error:"), err
    with stored(home) as loci:
        assert [e.content for e in loci.events("s")] == ["kept"]


def test_names_and_key_ids_that_are_not_text_are_refused(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # What Python makes of bytes that are not UTF-8 on the command line.
    for args in (["user", "erase", "u\udcff", "--yes"], ["keys", "revoke", "k\udcff"],
                 ["focus", "s", "--goal", "g\udcff"]):
        code, _, err = run(capsys, *args)
        assert code == 2 and err.startswith("error:"), (args, err)
    assert run(capsys, "add", "s", "user", "hello")[0] == 0
    assert run(capsys, "context", "s", "hi")[0] == 0


def test_memory_files_with_tags_that_are_no_list_are_reported(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "remember", "the user lives in Lisbon", "--type", "sticky")[0] == 0
    files = sorted((home / "memory").rglob("*.md"))
    assert files, "the memory mirror wrote no file"
    text = files[0].read_text(encoding="utf-8")
    files[0].write_text(text.replace("tags: []", "tags: 5"), encoding="utf-8")
    code, out, err = run(capsys, "sync")
    assert "Traceback" not in err and "tags" in out + err, (code, out, err)
    with stored(home) as loci:
        assert [m.content for m in loci.memories()] == ["the user lives in Lisbon"]


def test_a_migration_from_a_missing_file_creates_nothing(
        home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    code, _, err = run(capsys, "migrate", "--from", f"sqlite:///{missing}", "--to",
                       f"sqlite:///{tmp_path / 'new.db'}")
    assert code == 2 and "no SQLite store" in err, err
    assert not missing.exists() and not (tmp_path / "new.db").exists()


def test_importing_an_export_twice_adds_nothing_the_second_time(
        home: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for text in ("first", "second"):
        assert run(capsys, "add", "s", "user", text)[0] == 0
    out = tmp_path / "s.jsonl"
    assert run(capsys, "export", "s", "-o", str(out))[0] == 0
    out.write_bytes(b"\xef\xbb\xbf" + out.read_bytes())  # as some editors save it
    for expected in ("imported 2 events into copy", "imported 0 events into copy"):
        code, printed, err = run(capsys, "import", str(out), "--session", "copy")
        assert code == 0 and expected in printed, (printed, err)
    assert run(capsys, "import", str(out), "--session", "s")[1].startswith("imported 0")
    with stored(home) as loci:
        assert [e.content for e in loci.events("copy")] == ["first", "second"]
        assert [e.content for e in loci.events("s")] == ["first", "second"]


@pytest.mark.parametrize("command", [["tokens", "-"], ["import", "-"], ["kb", "put", "/a.md", "-"]])
def test_a_command_started_with_standard_input_closed_says_what_it_read(
        home: Path, command: list[str]) -> None:
    """``loci … <&-`` (no standard input at all) reads nothing, as from an empty one: an
    answer or a one-line error, never a traceback."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "loci", *command], capture_output=True,
                          text=True, timeout=60, preexec_fn=lambda: os.close(0))
    assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr


def test_an_unreachable_postgresql_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """psycopg's message holds "\\n\\t": the CLI's error stays one line."""
    code = main(["--store", "postgresql://u@127.0.0.1:1/db", "sessions"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: cannot reach PostgreSQL") and (
        err.count("\n") == 1)
