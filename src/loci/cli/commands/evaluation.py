"""``loci eval``: what Loci's compiled context holds of a stored session's trail."""

from __future__ import annotations

import click

from loci import Loci
from loci.cli.app import cli, json_option, print_json, scoped
from loci.evaluation import CUTS, evaluate, numbers, report_lines


@cli.command(name="eval")
@click.argument("session")
@click.option("--window", "windows", default="32000", show_default=True,
              help="Context windows to replay at, in tokens, comma-separated.")
@click.option("--at", "points", default=",".join(str(c) for c in CUTS), show_default=True,
              help="Points of the session (fractions of its messages), comma-separated.")
@json_option
@scoped
def eval_(loci: Loci, session: str, windows: str, points: str, as_json: bool) -> None:
    """Replay SESSION step by step as its agent saw it, in a scratch store, and report
    at each point what the compiled context holds of the agent's trail (files, commands,
    errors, edits, the task) against the last N tokens of the transcript at the same N,
    and which misses search_conversation finds. SESSION is only read.
    """
    reports = evaluate(loci, session, numbers(windows, int, "--window"),
                       numbers(points, float, "--at"))
    if as_json:
        print_json(reports)
        return
    for report in reports:
        click.echo("\n".join(report_lines(report)))
