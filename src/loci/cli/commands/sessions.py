"""Session commands: add, log, sessions, import, export."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from loci import Loci
from loci.cli.app import cli, json_option, one_line, print_json, scoped
from loci.models import ROLES
from loci.timeutil import format_timestamp


@cli.command()
@click.argument("session")
@click.argument("role", type=click.Choice(ROLES), metavar="ROLE")
@click.argument("text")
@click.option("--raw", is_flag=True, help="Store assistant text as is, without parsing tags.")
@json_option
@scoped
def add(loci: Loci, session: str, role: str, text: str, raw: bool, as_json: bool) -> None:
    """Append a message with ROLE (user, assistant, system, tool) to SESSION.

    An assistant message has its [MEMORY:type] … [/MEMORY] and [STATE:key] … [/STATE]
    tags saved and stripped (the raw text stays in the event's metadata).
    """
    if role == "assistant" and not raw:
        event, result = loci.add_reply(session, text)
        saved = [f"{r.action} {r.memory.id} [{r.memory.type}]" for r in result.saved]
        saved += [f"state {s.key} = {s.value}" for s in result.state]
    else:
        event, saved = loci.add(session, role, text), []
    if as_json:
        print_json({"event": event, "saved": saved})
        return
    click.echo(f"added event {event.id} to {session} ({event.tokens} tokens)")
    for line in saved:
        click.echo(f"  {line}")


@cli.command()
@click.argument("session")
@click.option("--active", is_flag=True, help="Hide archived (compacted) events.")
@json_option
@scoped
def log(loci: Loci, session: str, active: bool, as_json: bool) -> None:
    """Show the event log of SESSION."""
    events = loci.events(session, include_archived=not active)
    if as_json:
        print_json(events)
        return
    for e in events:
        who = e.role if e.type == "message" else f"{e.type}:{e.tool_name or e.tool_call_id or ''}"
        flag = " [archived]" if e.archived else ""
        click.echo(f"#{e.id} {format_timestamp(e.timestamp)} {who}{flag}: {one_line(e.content)}")


@cli.command()
@json_option
@scoped
def sessions(loci: Loci, as_json: bool) -> None:
    """List sessions with their message and token counts."""
    infos = loci.sessions()
    if as_json:
        print_json(infos)
        return
    if not infos:
        click.echo("no sessions yet: `loci add SESSION user TEXT` starts one, `loci import "
                   "--format claude-code ~/.claude/projects/PROJECT` brings your agent's "
                   "logs, `loci demo --keep` shows an example")
    for s in infos:
        click.echo(
            f"{s.id}: {s.message_count} messages, {s.event_count} events, "
            f"{s.token_count} tokens ({s.active_token_count} active), "
            f"updated {format_timestamp(s.updated_at)}"
        )


@cli.command(name="import")
@click.argument("path", type=click.Path(allow_dash=True))
@click.option("--format", "log_format", default="loci", show_default=True,
              type=click.Choice(["loci", *Loci.LOG_FORMATS]),
              help="The log's format: Loci's own JSONL, or an agent's own logs.")
@click.option("--session", help="Session to import into (default: the file name, or the "
                                 "log's own session id).")
@json_option
@scoped
def import_(loci: Loci, path: str, log_format: str, session: str | None,
            as_json: bool) -> None:
    """Import a session log: Loci's JSONL (one event per line; '-' reads stdin), or an
    agent's own logs with --format: claude-code (a session file or a project folder
    under ~/.claude/projects), codex (a rollout or a folder of them), openai (Chat
    Completions messages or Responses items), anthropic (a Messages list).

    Importing an agent's log again adds only what is new. A Loci JSONL file is checked
    first: a bad line names its number and nothing is stored.
    """
    if log_format != "loci":
        report = loci.import_log(log_format, path, session=session)
        if as_json:
            print_json(report)
            return
        if not report.sessions:
            click.echo(f"no {log_format} sessions found in {path}")
        for s in report.sessions:
            unreadable = (f"; {s.unreadable} unreadable lines of the log passed over"
                          if s.unreadable else "")
            click.echo(f"imported {s.added} events into {s.session} ({s.tool_calls} tool "
                       f"calls, {s.tool_results} results; {s.skipped} already there"
                       f"{unreadable})")
        return
    if path == "-":
        text = sys.stdin.read()
        session = session or "stdin"
    else:
        text = Path(path).read_text(encoding="utf-8")
        session = session or Path(path).stem
    events = loci.import_jsonl(text, session)
    if as_json:
        print_json({"session": session, "imported": len(events)})
    else:
        click.echo(f"imported {len(events)} events into {session}")


@cli.command()
@click.argument("session")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to a file.")
@scoped
def export(loci: Loci, session: str, output: str | None) -> None:
    """Export SESSION as JSONL (the format `loci import` reads)."""
    lines = list(loci.export_jsonl(session))
    text = "".join(line + "\n" for line in lines)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)
