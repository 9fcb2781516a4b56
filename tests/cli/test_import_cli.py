"""``loci import --format``: an agent's own logs from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loci.cli.app import main
from tests.importers.conftest import CHAT_LIST, CLAUDE_PROJECT


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_claude_code_project_is_imported_once(home: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "import", "--format", "claude-code", str(CLAUDE_PROJECT))
    assert code == 0
    assert "imported 341 events into claude-code/3af9b1a7-6512-4883-ad18-320658ced099 " \
           "(168 tool calls, 152 results; 0 already there; 35 unreadable lines of the log " \
           "passed over)" in out
    code, out, _ = run(capsys, "import", "--format", "claude-code", str(CLAUDE_PROJECT),
                       "--json")
    report = json.loads(out)
    assert code == 0 and report["format"] == "claude-code"
    assert [s["added"] for s in report["sessions"]] == [0, 0]
    code, out, _ = run(capsys, "sessions")
    assert "claude-code/3af9b1a7-6512-4883-ad18-320658ced099: " in out


def test_an_openai_list_into_a_named_session(home: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "import", "--format", "openai", str(CHAT_LIST),
                       "--session", "sqlfluff")
    assert code == 0 and "into sqlfluff (" in out
    code, out, _ = run(capsys, "log", "sqlfluff")
    assert "tool_call:bash" in out and "tool_result:bash" in out


@pytest.mark.parametrize("args, message", [
    (("--format", "codex", "missing-folder"), "no such file or folder"),
    (("--format", "gemini", "x"), "Invalid value for '--format'"),
])
def test_bad_input_is_one_line_and_exit_code_2(home: Path, capsys: pytest.CaptureFixture[str],
                                               args: tuple[str, ...], message: str) -> None:
    code, _, err = run(capsys, "import", *args)
    assert code == 2 and message in err
