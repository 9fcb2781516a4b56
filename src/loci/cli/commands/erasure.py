"""A session erased, and a whole user erased, exported and imported: `loci session rm`,
`loci user erase`, `loci user export`, `loci user import`."""

from __future__ import annotations

from pathlib import Path

import click

from loci import Loci, UserErasure
from loci.cli.app import cli, json_option, print_json, scoped
from loci.cli.commands.knowledge import session


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
        if loci.runtime.finish_erasure():
            click.echo(f"no session {session_id!r} is left; an erasure that was "
                       "interrupted had deleted rows, and their text is now purged")
            return
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
        return
    kept = " (the memories and documents derived from it kept)" if keep_derived else ""
    click.echo(f"erased session {session_id}: {done.events} events, "
               f"{len(done.memories)} memories and {len(done.documents)} documents"
               f"{kept}")


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
        done = loci.runtime.erase_user(name)  # finishes an interrupted erasure, if any
        if not done.resumed:
            raise click.UsageError(f"no user {name!r} in this store")
    else:
        if not yes:
            click.echo(f"user {name}: agents {', '.join(agents) or '-'}; "
                       f"{len(keys)} API keys", err=True)
            click.confirm("Erase all of it? It cannot be undone", abort=True, err=True)
        done = loci.runtime.erase_user(name)
    if as_json:
        print_json(done)
    else:
        click.echo(describe(done))


def describe(done: UserErasure) -> str:
    """What erasing a user did, as it happened."""
    if done.resumed:
        return (f"user {done.user}: nothing was left; an erasure that was interrupted "
                "had deleted their rows, and their text is now purged from the store")
    agents = ", ".join(done.agents) or "-"
    purged = ("the erased text purged from the database file" if done.purged else
              "the database drops the deleted rows when it next vacuums")
    return (f"erased user {done.user}: agents {agents}; {done.rows} rows "
            f"({done.keys} of them API keys, now revoked); {done.files} memory files "
            f"removed; {purged}")


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
    of that user (versions kept; ids too, unless other users' rows hold them)."""
    scopes = loci.runtime.import_user(Path(file).read_bytes())
    agents = ", ".join(s.agent for s in scopes)
    click.echo(f"imported user {scopes[0].tenant if scopes else '-'}: agents {agents or '-'}")
