"""Options before the command: ``loci --store URL sessions``, ``loci --user maya add``."""

from __future__ import annotations

from pathlib import Path

import pytest

from loci.cli.app import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_store_and_user_before_the_command(home: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'other.db'}"
    assert run(capsys, "--store", url, "--user", "maya", "add", "work", "user",
               "I live in Lisbon")[0] == 0
    code, out, _ = run(capsys, "--store", url, "--user", "maya", "sessions")
    assert code == 0 and out.startswith("work: 1 messages")
    assert "Lisbon" in run(capsys, "--user", "maya", "--store", url, "log", "work")[1]
    # Elsewhere nothing: the options chose the store and the user.
    assert run(capsys, "--store", url, "sessions")[1].startswith("no sessions yet")
    assert run(capsys, "--user", "maya", "sessions")[1].startswith("no sessions yet")
    assert (tmp_path / "other.db").exists()


def test_the_command_s_own_option_wins(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--user", "maya", "add", "s", "user", "hi", "--user", "bob")[0] == 0
    assert run(capsys, "--user", "bob", "sessions")[1].startswith("s: 1 messages")
    assert run(capsys, "--user", "maya", "sessions")[1].startswith("no sessions yet")


def test_empty_lists_say_what_to_do(home: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "sessions")
    assert code == 0 and "loci import --format claude-code" in out and "loci demo" in out
    code, out, _ = run(capsys, "--workspace", str(tmp_path), "skills", "list")
    assert code == 0 and f"no skills yet: write {tmp_path / 'skills'}/NAME.md" in out
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "deploy.md").write_text(
        "---\nslug: deploy\nname: Deploy\ntriggers:\n  keywords: [deploy]\n---\n"
        "Run make deploy.\n")
    code, out, _ = run(capsys, "--workspace", str(tmp_path), "skills", "list")
    assert code == 0 and out.startswith("deploy: Deploy") and "no skills" not in out
