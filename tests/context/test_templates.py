"""Workspace templates: written once and never overwritten, valid TOML, no
request-specific bytes in the static prefix, SOUL.md from answers, AGENTS.toml parsing,
and a written workspace that loads back."""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

from loci.context.skills import clear_cache, load_skill_set, match_skills
from loci.context.templates import (
    STATIC_FILES,
    WORKSPACE_FILES,
    AgentSpec,
    load_agents,
    soul_from_answers,
    write_workspace,
)
from loci.context.workspace import Workspace
from loci.errors import ValidationError
from loci.settings import Settings, load_settings

EXPECTED_FILES = {"SOUL.md", "AGENTS.toml", "USER.md", "TOOLS.md", "BOOT.md", "MEMORY.md",
                  "logs/daily/README.md", "skills/example.md", "loci.toml"}


def uncomment(text: str, start: str = "") -> str:
    """The text with every commented-out setting (``# key = value``, ``# [table]``)
    enabled, from the line ``start`` on; trailing comments stay."""
    lines, active = [], not start
    for line in text.splitlines():
        active = active or line.startswith(start)
        if active and re.match(r"# (\[|[\w\"-]+ = )", line):
            line = line[2:]
        lines.append(line)
    return "\n".join(lines)


def test_write_workspace_creates_every_file(tmp_path: Path) -> None:
    root = tmp_path / "new" / "ws"
    result = write_workspace(root)
    assert set(WORKSPACE_FILES) == EXPECTED_FILES
    assert sorted(result.written) == sorted(root / name for name in EXPECTED_FILES)
    assert result.skipped == []
    for name, text in WORKSPACE_FILES.items():
        assert (root / name).read_bytes() == text.encode("utf-8")


def test_existing_files_are_never_overwritten(tmp_path: Path) -> None:
    write_workspace(tmp_path)
    (tmp_path / "SOUL.md").write_text("# My own soul\n")
    (tmp_path / "USER.md").unlink()
    result = write_workspace(tmp_path)
    assert result.written == [tmp_path / "USER.md"]
    assert tmp_path / "SOUL.md" in result.skipped and len(result.skipped) == 8
    assert (tmp_path / "SOUL.md").read_text() == "# My own soul\n"
    forced = write_workspace(tmp_path, overwrite=True)
    assert len(forced.written) == 9 and forced.skipped == []
    assert (tmp_path / "SOUL.md").read_text() == WORKSPACE_FILES["SOUL.md"]


def test_write_workspace_refuses_a_file_as_directory(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ValidationError, match="not a directory"):
        write_workspace(target)


def test_templates_say_what_each_file_is_for_and_when_it_is_loaded() -> None:
    for name, text in WORKSPACE_FILES.items():
        assert text.endswith("\n") and len(text) < 3_000, name
        if name.endswith(".md") and "/" not in name:
            assert text.startswith(f"<!-- {name}: "), name
            assert "loaded" in text.lower(), name
    assert "YYYY-MM-DD.md" in WORKSPACE_FILES["logs/daily/README.md"]


def test_static_prefix_files_hold_nothing_request_specific() -> None:
    date_or_time = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|\{[a-z_]*\}")
    for name in STATIC_FILES:
        assert not date_or_time.search(WORKSPACE_FILES[name]), name
    assert "cached static prefix" in WORKSPACE_FILES["SOUL.md"]


def test_agents_template_is_valid_toml_with_a_default_agent() -> None:
    text = WORKSPACE_FILES["AGENTS.toml"]
    assert set(tomllib.loads(text)) == {"agents"}
    agents = load_agents(text)
    assert list(agents) == ["default"]
    assert agents["default"].name == "Assistant" and agents["default"].personality
    example = load_agents(uncomment(text, start="# [agents.researcher]"))
    assert example["researcher"].tools == ("web_search", "http_fetch")
    assert "research" in example["researcher"].routes


def flat_values(a: object, b: object, prefix: str = "") -> list[tuple[str, object, object]]:
    """(flat name, value in ``a``, value in ``b``) of every knob, sections walked."""
    found = []
    for f in fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, f.name), getattr(b, f.name)
        if is_dataclass(x):
            found += flat_values(x, y, f"{f.name}_")
        else:
            found.append((prefix + f.name, x, y))
    return found


def test_settings_template_is_all_defaults_and_every_key_is_known(tmp_path: Path) -> None:
    text = WORKSPACE_FILES["loci.toml"]
    assert tomllib.loads(text) == {}                      # everything is commented out
    enabled = uncomment(text)
    assert len(tomllib.loads(enabled)) >= 10
    (tmp_path / "loci.toml").write_text(enabled)
    loaded = load_settings(env={}, cwd=tmp_path, home=tmp_path / "home")
    for name, default, value in flat_values(Settings(), loaded):
        if name not in ("home", "workspace") and not isinstance(default, dict | list):
            assert value == default, name
    assert loaded.models == {"my-local-model": 32768}
    assert loaded.memory_types == {"meeting_notes": 14}


def test_written_workspace_loads_back(tmp_path: Path) -> None:
    write_workspace(tmp_path)
    clear_cache()
    skills = load_skill_set([tmp_path], strict=True)
    assert [s.slug for s in skills.skills] == ["example"] and skills.issues == ()
    found = match_skills(skills.skills, "How do I write a skill file?")
    assert [(s.slug, n) for s, n in found] == [("example", 2)]
    assert match_skills(skills.skills, "What's the weather?") == []
    agents = load_agents((tmp_path / "AGENTS.toml").read_text())
    assert agents["default"] == load_agents(WORKSPACE_FILES["AGENTS.toml"])["default"]
    identity = Workspace([tmp_path]).identity()
    assert identity is not None and "You are Assistant" in identity.text


def test_soul_from_answers() -> None:
    text = soul_from_answers(
        "  Ada ", "a senior systems engineer with deep Rust and Linux expertise.",
        "You communicate concisely and directly",
        ["Correctness over speed", "- Simple solutions over clever ones", " "],
        ["Say so when uncertain rather than guessing"],
    )
    assert text == (
        "# Soul\n\n"
        "You are Ada, a senior systems engineer with deep Rust and Linux expertise.\n"
        "You communicate concisely and directly.\n\n"
        "You value:\n- Correctness over speed\n- Simple solutions over clever ones\n\n"
        "Boundaries:\n- Say so when uncertain rather than guessing\n"
    )
    assert soul_from_answers("Ada", "", "", [], []) == "# Soul\n\nYou are Ada.\n"
    with pytest.raises(ValidationError, match="name"):
        soul_from_answers("  ", "role", "", [], [])


def test_load_agents_defaults_and_cleanup() -> None:
    agents = load_agents('[agents.ada]\ndescription = "research"\n'
                         '[agents.bob]\nname = "Bob"\ntools = ["a", "b", "a", " "]\n')
    assert agents == {
        "ada": AgentSpec(name="ada", description="research"),
        "bob": AgentSpec(name="Bob", tools=("a", "b")),
    }
    assert load_agents("") == {}


@pytest.mark.parametrize(("text", "message"), [
    ("[agents.ada\n", "invalid TOML"),
    ("[agents.ada]\nmood = 'x'\n", "unknown key.*mood"),
    ("[agents.ada]\ntools = 'web_search'\n", "tools must be a list"),
    ("[agents.ada]\nname = 3\n", "name must be a string"),
    ("[[agents]]\nname = 'x'\n", r"\[agents.<id>\] tables"),
    ("agents = 3\n", r"\[agents.<id>\] tables"),
    ("[agents]\nada = 'x'\n", r"\[agents.ada\] must be a table"),
    ("[routing]\ndefault = 'ada'\n", "unknown top-level key.*routing"),
])
def test_load_agents_rejects_bad_files(text: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as error:
        load_agents(text, source="ws/AGENTS.toml")
    assert str(error.value).startswith("ws/AGENTS.toml")
