"""Memory, search and state commands."""

from __future__ import annotations

import click

from loci.cli.app import cli, json_option, one_line, print_json, scoped
from loci.engine import Loci
from loci.timeutil import format_timestamp


def _tags(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


@cli.command()
@click.argument("text")
@click.option("--type", "memory_type", default="project_context", show_default=True,
              help="sticky, user_preference, project_context, learned_pattern or custom.")
@click.option("--tags", help="Comma-separated tags.")
@json_option
@scoped
def remember(loci: Loci, text: str, memory_type: str, tags: str | None, as_json: bool) -> None:
    """Store TEXT as a memory."""
    memory = loci.remember(text, type=memory_type, tags=_tags(tags))
    if as_json:
        print_json(memory)
    else:
        expires = format_timestamp(memory.expires_at) if memory.expires_at else "never"
        click.echo(f"remembered {memory.id} ({memory.type}, expires {expires})")


@cli.command()
@click.option("--type", "memory_type", help="Only this type.")
@click.option("--all", "include_expired", is_flag=True, help="Include expired memories.")
@json_option
@scoped
def memories(loci: Loci, memory_type: str | None, include_expired: bool, as_json: bool) -> None:
    """List memories, newest first."""
    items = loci.memories(memory_type, include_expired=include_expired)
    if as_json:
        print_json(items)
        return
    for m in items:
        star = "★ " if m.type == "sticky" else ""
        tags = f" [{', '.join(m.tags)}]" if m.tags else ""
        click.echo(f"{star}{m.id} {m.type}{tags}: {one_line(m.content)}")


@cli.command()
@click.argument("memory_id")
@scoped
def forget(loci: Loci, memory_id: str) -> None:
    """Delete the memory MEMORY_ID."""
    loci.forget(memory_id)
    click.echo(f"forgot {memory_id}")


@cli.command()
@click.argument("query")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--session", help="Only this session's events.")
@json_option
@scoped
def search(loci: Loci, query: str, limit: int, session: str | None, as_json: bool) -> None:
    """Search memories and conversations for QUERY (plain text, never syntax)."""
    hits = loci.search(query, limit, session=session)
    if as_json:
        print_json(hits)
        return
    if not hits:
        click.echo("no results")
    for h in hits:
        where = f"session {h.session}" if h.session else h.metadata.get("type", "")
        click.echo(f"{h.score:.3f} {h.kind} {h.id} ({where}): {one_line(h.text)}")


@cli.group()
def state() -> None:
    """Key/value state, overwritten in place."""


@state.command(name="set")
@click.argument("key")
@click.argument("value")
@scoped
def state_set(loci: Loci, key: str, value: str) -> None:
    """Set KEY to VALUE."""
    loci.state_set(key, value)
    click.echo(f"{key} = {value}")


@state.command(name="get")
@click.argument("key")
@json_option
@scoped
def state_get(loci: Loci, key: str, as_json: bool) -> None:
    """Print the value of KEY."""
    item = loci.state_get(key)
    if as_json:
        print_json(item)
    else:
        click.echo(item.value)


@state.command(name="list")
@json_option
@scoped
def state_list(loci: Loci, as_json: bool) -> None:
    """List all keys and values."""
    items = loci.state()
    if as_json:
        print_json(items)
        return
    for item in items:
        click.echo(f"{item.key} = {item.value}  (updated {format_timestamp(item.updated_at)})")
