"""``loci usage``: the LLM calls recorded for a session or for all, priced."""

from __future__ import annotations

import click

from loci import Loci, UsageReport, UsageTotals
from loci.cli.app import cli, json_option, print_json, scoped
from loci.timeutil import format_timestamp, parse_timestamp


@cli.command()
@click.argument("session", required=False)
@click.option("--since", metavar="TIME", help="ISO 8601: calls from this time on.")
@click.option("--until", metavar="TIME", help="ISO 8601: calls before this time.")
@click.option("--all-agents", is_flag=True, help="Every agent of the user.")
@json_option
@scoped
def usage(loci: Loci, session: str | None, since: str | None, until: str | None,
          all_agents: bool, as_json: bool) -> None:
    """Tokens, prompt-cache hits and cost of the LLM calls of SESSION (each call) or of
    every session, beside the cost of sending each session's whole log uncached."""
    report = loci.usage.report(
        session, since=parse_timestamp(since) if since else None,
        until=parse_timestamp(until) if until else None, all_agents=all_agents)
    if as_json:
        print_json(report.to_dict())
    elif session is not None:
        _calls(report)
    else:
        _sessions(report)


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def _summary(totals: UsageTotals) -> str:
    saving = "" if totals.saving is None else f", {totals.saving:.0%} saved"
    return (f"{totals.calls} calls, {totals.usage.input_tokens:,} input tokens "
            f"({totals.hit_rate:.0%} from the cache), {totals.usage.output_tokens:,} output; "
            f"cost {_money(totals.cost)} against {_money(totals.full_cost)} for the whole "
            f"log uncached{saving}; {totals.compactions} compactions")


def _calls(report: UsageReport) -> None:
    click.echo(f"{'time':<20} {'model':<22} {'face':<9} {'input':>8} {'cached':>8} "
               f"{'written':>8} {'output':>7} {'ms':>7}  context")
    seen = 0
    for call in report.calls:
        mark = "  (after a compaction)" if call.compactions > seen else ""
        seen = call.compactions
        latency = "-" if call.latency_ms is None else f"{call.latency_ms:.0f}"
        click.echo(f"{format_timestamp(call.at)[:19]:<20} {call.model[:22]:<22} "
                   f"{call.face:<9} {call.input_tokens:>8,} {call.cached_tokens:>8,} "
                   f"{call.cache_write_tokens:>8,} {call.output_tokens:>7,} {latency:>7}  "
                   f"{call.context_tokens:,}{mark}")
    _footer(report)


def _sessions(report: UsageReport) -> None:
    click.echo(f"{'session':<24} {'agent':<12} {'calls':>6} {'input':>10} {'hit':>5} "
               f"{'cost':>10} {'uncached log':>13}")
    for item in report.sessions:
        t = item.totals
        click.echo(f"{item.session[:24]:<24} {item.agent[:12]:<12} {t.calls:>6} "
                   f"{t.usage.input_tokens:>10,} {t.hit_rate:>5.0%} {_money(t.cost):>10} "
                   f"{_money(t.full_cost):>13}")
    _footer(report)


def _footer(report: UsageReport) -> None:
    click.echo(f"\n{_summary(report.totals)}")
    if report.unpriced:
        click.echo(f"not priced (add them under [prices] in loci.toml): "
                   f"{', '.join(report.unpriced)}")
