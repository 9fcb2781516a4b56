"""Workspace commands: init, soul, skills, focus."""

from __future__ import annotations

from pathlib import Path

import click

from loci import Criterion, Focus, Loci, soul_from_answers, write_workspace
from loci.cli.app import cli, json_option, print_json, scoped


@cli.command()
@click.argument("directory", required=False, default=".",
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
def init(directory: Path, force: bool) -> None:
    """Write a workspace of commented templates into DIRECTORY (default: here).

    SOUL.md, AGENTS.toml, USER.md, TOOLS.md, BOOT.md, MEMORY.md, logs/daily/,
    skills/example.md and loci.toml. Existing files are kept unless --force.
    """
    result = write_workspace(directory, overwrite=force)
    for path in result.written:
        click.echo(f"wrote {path}")
    for path in result.skipped:
        click.echo(f"kept  {path} (exists; --force to overwrite)")


@cli.command()
@click.option("--workspace", "directory", default=".", show_default=True,
              type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing SOUL.md.")
def soul(directory: Path, force: bool) -> None:
    """Write SOUL.md (the agent's identity) by answering a few questions."""
    target = directory / "SOUL.md"
    if target.exists() and not force:
        raise click.ClickException(f"{target} exists; use --force to replace it")
    name = click.prompt("Agent name")
    role = click.prompt("What is it (role, expertise)?")
    style = click.prompt("How does it communicate?", default="concisely and directly")
    values = click.prompt("Values, comma-separated", default="correctness, simplicity")
    limits = click.prompt("Boundaries, comma-separated", default="say when unsure")
    text = soul_from_answers(name, role, style, _split(values), _split(limits))
    directory.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    click.echo(f"wrote {target}")


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


@cli.group()
def skills() -> None:
    """Skills: skills/*.md with triggers, injected when they match a message."""


@skills.command(name="list")
@json_option
@scoped
def skills_list(loci: Loci, as_json: bool) -> None:
    """List the workspace's skills and any files that could not be loaded."""
    found = loci.workspace().skills()
    if as_json:
        print_json({"skills": [{"slug": s.slug, "name": s.skill.name, "path": str(s.path),
                                "keywords": s.skill.keywords, "patterns": s.skill.patterns}
                               for s in found.skills],
                    "issues": [{"path": str(i.path), "reason": i.reason} for i in found.issues]})
        return
    if not found.skills and not found.issues:
        where = loci.workspace().directories[0] / "skills"
        click.echo(f"no skills yet: write {where}/NAME.md (a skill with its triggers; "
                   "`loci init` writes an example)")
    for s in found.skills:
        click.echo(f"{s.slug}: {s.skill.name} ({s.path})")
    for issue in found.issues:
        click.echo(f"skipped {issue.path}: {issue.reason}", err=True)


@skills.command(name="match")
@click.argument("text")
@json_option
@scoped
def skills_match(loci: Loci, text: str, as_json: bool) -> None:
    """Score every skill against TEXT (keyword matches + pattern matches)."""
    matches = loci.workspace().match_skills(text)
    if as_json:
        print_json([{"slug": s.slug, "score": score} for s, score in matches])
        return
    if not matches:
        click.echo("no skill matches")
    for s, score in matches:
        click.echo(f"{score} {s.slug} ({s.skill.name})")


@cli.command()
@click.argument("session")
@click.option("--goal", help="The goal of this session (omit with --clear).")
@click.option("--criterion", "criteria", multiple=True,
              help="A success criterion, optionally with a weight: 'tests pass:3'.")
@click.option("--constraint", "constraints", multiple=True, help="A constraint.")
@click.option("--status", default="", help="The current evaluation status.")
@click.option("--clear", is_flag=True, help="Remove the focus.")
@scoped
def focus(loci: Loci, session: str, goal: str | None, criteria: tuple[str, ...],
          constraints: tuple[str, ...], status: str, clear: bool) -> None:
    """Set the focus of SESSION: goal, weighted criteria, constraints."""
    if clear:
        loci.set_focus(session, None)
        click.echo(f"cleared the focus of {session}")
        return
    if not goal:
        raise click.UsageError("--goal is required (or --clear)")
    loci.set_focus(session, Focus(goal, tuple(Criterion.parse(c) for c in criteria),
                                  constraints, status))
    click.echo(f"focus of {session}: {goal}")
