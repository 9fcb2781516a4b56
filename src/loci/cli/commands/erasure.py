"""A session erased, and a whole user erased, exported and imported: `loci session rm`,
`loci user erase`, `loci user export`, `loci user import`."""

from __future__ import annotations

from pathlib import Path

import click

from loci.cli.app import cli, json_option, print_json, scoped
from loci.cli.commands.knowledge import session
from loci.engine import Loci


@session.command(name="rm")
@click.argument("session_id", metavar="SESSION")
@click.option("--keep-derived", is_flag=True,
              help="Keep the memories and documents derived from the session.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@scoped
def session_rm(loci: Loci, session_id: str, keep_derived: bool, yes: bool,
               as_json: bool) -> None:
    """Erase SESSION: its events, compactions and index entries, and (unless
    --keep-derived) the memories and documents derived from it. Lists them first."""
    plan = loci.erase_session(session_id, keep_derived=keep_derived, dry_run=True)
    if not plan.events and not plan.memories and not plan.documents:
        raise click.UsageError(f"no session {session_id!r} for this user and agent")
    if not as_json:
        click.echo(f"session {session_id}: {plan.events} events")
        for memory_id in plan.memories:
            click.echo(f"  memory {memory_id}: {one_memory(loci, memory_id)}")
        for path in plan.documents:
            click.echo(f"  document {path}")
    if not yes:
        click.confirm("Erase all of this? It cannot be undone", abort=True, err=True)
    done = loci.erase_session(session_id, keep_derived=keep_derived)
    if as_json:
        print_json(done)
    else:
        click.echo(f"erased {done.events} events, {len(done.memories)} memories and "
                   f"{len(done.documents)} documents of {session_id}")


def one_memory(loci: Loci, memory_id: str) -> str:
    text = loci.memory(memory_id).content
    return text if len(text) <= 80 else text[:79] + "…"


@cli.group()
def user() -> None:
    """A whole user (tenant): every agent of theirs."""


@user.command(name="erase")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@scoped
def user_erase(loci: Loci, name: str, yes: bool, as_json: bool) -> None:
    """Erase everything of user NAME: every agent's sessions, memories with their history
    and files, state, documents with their versions, API keys and index entries."""
    agents = loci.runtime.agents(name)
    keys = loci.runtime.api_keys(name)
    if not agents and not keys:
        raise click.UsageError(f"no user {name!r} in this store")
    if not yes:
        click.echo(f"user {name}: agents {', '.join(agents) or '-'}; {len(keys)} API keys",
                   err=True)
        click.confirm("Erase all of it? It cannot be undone", abort=True, err=True)
    done = loci.runtime.erase_user(name)
    if as_json:
        print_json(done)
    else:
        click.echo(f"erased user {name}: {len(done.agents)} agents, {done.rows} rows")


@user.command(name="export")
@click.argument("name")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True,
              help="The archive to write (a zip file).")
@scoped
def user_export(loci: Loci, name: str, output: str) -> None:
    """Export everything of user NAME, every agent, as one archive: sessions as JSONL,
    memories with their history, state, documents with their versions."""
    if not loci.runtime.agents(name):
        raise click.UsageError(f"no user {name!r} in this store")
    data = loci.runtime.export_user(name)
    Path(output).write_bytes(data)
    click.echo(f"wrote {output} ({len(data):,} bytes)")


@user.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@scoped
def user_import(loci: Loci, file: str) -> None:
    """Import an archive written by `loci user export` into a store that holds nothing
    of that user (ids and versions are kept)."""
    scopes = loci.runtime.import_user(Path(file).read_bytes())
    agents = ", ".join(s.agent for s in scopes)
    click.echo(f"imported user {scopes[0].tenant if scopes else '-'}: agents {agents or '-'}")
