"""``loci eval``: what Loci's compiled context holds of a stored session's trail."""

from __future__ import annotations

import click

from loci import Loci
from loci.cli.app import cli, json_option, print_json, scoped
from loci.evaluation import CUTS, evaluate, report_lines


def _numbers(text: str, kind: type[int] | type[float], name: str) -> list[float]:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}",
                                 param_hint=name) from None
    if not values:
        raise click.BadParameter("give at least one", param_hint=name)
    return values


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
    sizes = [int(w) for w in _numbers(windows, int, "--window")]
    cuts = _numbers(points, float, "--at")
    if any(w < 1000 for w in sizes):
        raise click.BadParameter("a window is at least 1000 tokens", param_hint="--window")
    if any(not 0 < c <= 1 for c in cuts):
        raise click.BadParameter("points are fractions in (0, 1]", param_hint="--at")
    reports = evaluate(loci, session, sizes, sorted(set(cuts)))
    if as_json:
        print_json(reports)
        return
    for report in reports:
        click.echo("\n".join(report_lines(report)))
