from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from loci import Loci
from loci.cli.app import cli, main
from loci.cli.commands import workspace  # noqa: F401  (registers the commands)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_init_writes_templates_and_keeps_existing(home: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "agent"
    code, out, _ = run(capsys, "init", str(target))
    assert code == 0 and "wrote" in out
    for name in ("SOUL.md", "AGENTS.toml", "USER.md", "TOOLS.md", "BOOT.md", "MEMORY.md",
                 "skills/example.md", "loci.toml"):
        assert (target / name).is_file(), name
    (target / "SOUL.md").write_text("# Soul\nMine.\n")
    code, out, _ = run(capsys, "init", str(target))
    assert "kept" in out and (target / "SOUL.md").read_text() == "# Soul\nMine.\n"


def test_soul_is_written_from_answers(tmp_path: Path) -> None:
    answers = "Ada\na research assistant\nbriefly\naccuracy, care\nno guessing\n"
    result = CliRunner().invoke(cli, ["soul", "--workspace", str(tmp_path)], input=answers)
    assert result.exit_code == 0, result.output
    text = (tmp_path / "SOUL.md").read_text()
    assert "Ada" in text and "research assistant" in text and "accuracy" in text


def test_skills_list_match_and_injection(home: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "init", str(tmp_path))
    skills = tmp_path / "skills"
    (skills / "sol.md").write_text(
        "---\nslug: sol-price\nname: Solana Price Monitor\ntriggers:\n"
        "  keywords: [solana, SOL, sol, crypto, price]\n"
        "  patterns: [\".*price.*\", \".*token.*\"]\n---\nUse http_fetch on the price API.\n")
    (skills / "broken.md").write_text("no front matter here\n")
    _, out, err = run(capsys, "skills", "list")
    assert "sol-price: Solana Price Monitor" in out and "broken.md" in err
    assert run(capsys, "skills", "match", "What's the SOL price?")[1].startswith("3 sol-price")
    assert run(capsys, "skills", "match", "hello there")[1] == "no skill matches\n"
    with Loci.open() as loci:
        retrieved = loci.compile(None, "What's the SOL price?").retrieved
        assert "## Skill: Solana Price Monitor\nUse http_fetch" in retrieved
        assert "Solana" not in loci.compile(None, "hello").retrieved


def test_agents_toml_gives_identity_and_tools(home: Path, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.toml").write_text(
        '[agents.default]\nname = "Arvis"\npersonality = "Calm and precise."\n'
        'description = "Watches crypto prices."\ntools = ["web_search", "calculate"]\n')
    with Loci.open() as loci:
        static = loci.compile(None, "hi").static_prefix
    assert "You are Arvis. Calm and precise.\nYour job: Watches crypto prices." in static
    assert "You have access to: calculate, web_search." in static


def test_focus_command(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "add", "s", "user", "hello")
    assert run(capsys, "focus", "s", "--goal", "Ship v1", "--criterion", "tests pass:3",
               "--constraint", "no new deps")[0] == 0
    with Loci.open() as loci:
        assert "Goal: Ship v1" in loci.compile("s", "go").retrieved
    assert run(capsys, "focus", "s")[0] == 2
    run(capsys, "focus", "s", "--clear")
    with Loci.open() as loci:
        assert "Goal:" not in loci.compile("s", "go").retrieved
