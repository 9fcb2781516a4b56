"""Compaction commands: compact a session, list its compactions."""

from __future__ import annotations

import click

from loci import Loci
from loci.cli.app import cli, json_option, one_line, print_json, scoped
from loci.timeutil import format_timestamp


@cli.command()
@click.argument("session")
@click.option("--dry-run", is_flag=True, help="Show what would change; change nothing.")
@click.option("--instructions", help="Extra instructions for the summary.")
@click.option("--strategy", type=click.Choice(Loci.COMPACTION_STRATEGIES), default="full",
              show_default=True,
              help="full: mask + summarize; mask: tool outputs only; auto: summarize if "
                   "masking is not enough.")
@click.option("--model", help="Model whose window sets the preserve window.")
@json_option
@scoped
def compact(
    loci: Loci, session: str, dry_run: bool, instructions: str | None, strategy: str,
    model: str | None, as_json: bool,
) -> None:
    """Compact SESSION: mask old tool outputs, save facts, summarize and archive."""
    result = loci.compact(session, instructions=instructions, dry_run=dry_run,
                          strategy=strategy, model=model)
    if as_json:
        print_json(result)
        return
    verb = "would compact" if dry_run else "compacted"
    if not result.changed:
        click.echo(f"nothing to compact in {session} (all within the preserve window)")
        return
    reduction = 1 - result.tokens_after / result.tokens_before if result.tokens_before else 0
    click.echo(f"{verb} {session}: {result.tokens_before:,} → {result.tokens_after:,} tokens "
               f"({reduction:.0%} less); masked {result.masked} tool outputs, archived "
               f"{result.archived} events, saved {result.memories_saved} memories")
    for path in result.artifacts:
        click.echo(f"  artifact {path}")
    if result.summary:
        click.echo("\n" + result.summary)


@cli.command()
@click.argument("session")
@json_option
@scoped
def compactions(loci: Loci, session: str, as_json: bool) -> None:
    """List the compactions of SESSION."""
    records = loci.compactions(session)
    if as_json:
        print_json(records)
        return
    if not records:
        click.echo("no compactions")
    for c in records:
        click.echo(f"#{c.id} {format_timestamp(c.created_at)} {c.strategy}: events "
                   f"{c.first_event_id}-{c.last_event_id}, {c.tokens_before:,} → "
                   f"{c.tokens_after:,} tokens; {one_line(c.summary, 60)}")
