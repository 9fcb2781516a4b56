"""Memory, search and state commands."""

from __future__ import annotations

import sys
from typing import Any

import click

from loci import Loci, SearchFilters, SyncReport, ValidationError
from loci.checks import check_type
from loci.cli.app import cli, json_option, one_line, print_json, scoped
from loci.timeutil import format_timestamp


def _tags(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


@cli.command()
@click.argument("text")
@click.option("--type", "memory_type", default="project_context", show_default=True,
              help="sticky, user_preference, project_context, learned_pattern or custom.")
@click.option("--new-type", is_flag=True,
              help="Keep --type as a new type even if it looks like a typo of a known one.")
@click.option("--tags", help="Comma-separated tags.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the memory's id (for scripts).")
@json_option
@scoped
def remember(loci: Loci, text: str, memory_type: str, new_type: bool, tags: str | None,
             quiet: bool, as_json: bool) -> None:
    """Store TEXT as a memory."""
    known = loci.misspelt_type(memory_type)
    if known and not new_type:
        raise ValidationError(f"unknown memory type {memory_type!r}: did you mean {known!r}? "
                              "(add --new-type to keep it as a new type)")
    memory = loci.remember(text, type=memory_type, tags=_tags(tags))
    if as_json:
        print_json(memory)
    elif quiet:
        click.echo(memory.id)
    else:
        expires = format_timestamp(memory.expires_at) if memory.expires_at else "never"
        click.echo(f"remembered {memory.id} ({memory.type}, expires {expires})")


@cli.command()
@click.option("--type", "memory_type", help="Only this type.")
@click.option("--all", "include_expired", is_flag=True, help="Include expired memories.")
@click.option("--expired", is_flag=True, help="Only expired memories (kept until purged).")
@json_option
@scoped
def memories(
    loci: Loci, memory_type: str | None, include_expired: bool, expired: bool, as_json: bool
) -> None:
    """List memories, newest first (sticky ones starred)."""
    items = loci.memories(memory_type, include_expired=include_expired, expired_only=expired)
    if as_json:
        print_json(items)
        return
    for m in items:
        star = "★ " if m.type == "sticky" else ""
        tags = f" [{', '.join(m.tags)}]" if m.tags else ""
        expires = f" (expires {format_timestamp(m.expires_at)})" if m.expires_at else ""
        if m.superseded_by and m.expires_at:
            expires = f" (until {format_timestamp(m.expires_at)}, superseded by {m.superseded_by})"
        click.echo(f"{star}{m.id} {m.type}{tags}{expires}: {one_line(m.content)}")


@cli.command()
@click.option("--expired", is_flag=True, help="Delete expired memories.")
@click.option("--older-than", "days", type=click.FloatRange(min=0, min_open=True),
              metavar="DAYS", help="Erase every user's sessions untouched for DAYS.")
@click.option("--archive", is_flag=True,
              help="With --older-than: archive those sessions instead of erasing them.")
@scoped
def purge(loci: Loci, expired: bool, days: float | None, archive: bool) -> None:
    """Hard-delete expired memories (--expired) and apply retention (--older-than DAYS:
    sessions untouched that long are erased, or archived with --archive; memories
    learned from them stay)."""
    if not expired and days is None:
        raise click.UsageError("say what to purge: --expired and/or --older-than DAYS")
    if expired:
        click.echo(f"purged {loci.purge_expired()} expired memories")
    if days is not None:
        done = loci.runtime.apply_retention(days, "archive" if archive else "erase")
        verb = "archived" if archive else "erased"
        click.echo(f"{verb} {done.sessions} sessions ({done.events} events) untouched "
                   f"since {format_timestamp(done.cutoff)}")


@cli.group()
def memory() -> None:
    """One memory: its history."""


@memory.command(name="history")
@click.argument("memory_id")
@json_option
@scoped
def memory_history(loci: Loci, memory_id: str, as_json: bool) -> None:
    """Show MEMORY_ID now and every earlier version."""
    current = loci.memory(memory_id)
    versions = loci.memory_history(memory_id)
    if as_json:
        print_json({"current": current, "versions": versions})
        return
    click.echo(f"now  ({format_timestamp(current.updated_at)}) [{current.type}] "
               f"{one_line(current.content)}")
    for v in reversed(versions):
        click.echo(f"v{v.version:<3} ({format_timestamp(v.updated_at)}, {v.reason}) "
                   f"[{v.type}] {one_line(v.content)}")


@memory.command(name="consolidate")
@click.option("--apply", "apply_id", is_flag=False, flag_value="", default=None,
              metavar="[ID]", help="Apply: the pending proposal ID you reviewed, or without "
              "ID one proposed now (shown first).")
@json_option
@scoped
def consolidate(loci: Loci, apply_id: str | None, as_json: bool) -> None:
    """Propose merges of duplicates, supersessions of older values, retirement of what
    is no fact (questions, greetings, markup, command lines, pasted documents) and
    retypes, as a diff to review; nothing changes without --apply. Applied changes are
    new versions (`loci memory history ID`); retired memories come back with `loci
    restore ID`. A proposal whose memories changed since is refused."""
    proposal = loci.consolidation() if apply_id else loci.consolidate()
    if proposal is None or (apply_id and proposal.id != apply_id):
        raise ValidationError(f"no pending proposal {apply_id!r}: run `loci memory "
                              "consolidate` and review the one it shows")
    applied = None
    if apply_id is not None and proposal.changes:
        applied = loci.apply_consolidation(proposal.id).counts()
    if as_json:
        print_json({**proposal.to_dict(), "applied": applied})
        return
    click.echo(proposal.to_text())
    if applied is not None:
        click.echo("\napplied: " + ", ".join(f"{n} {k}" for k, n in applied.items() if n))
    elif proposal.changes:
        click.echo(f"\nnothing applied; to apply: loci memory consolidate --apply {proposal.id}")


@cli.command(name="sync")
@click.option("--dry-run", is_flag=True, help="Only list what would change.")
@click.option("--yes", is_flag=True,
              help="Let many deleted files delete their memories (they stay restorable).")
@json_option
@scoped
def sync_command(loci: Loci, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Apply edits of the markdown mirror (memory/*.md) to the store.

    A memory whose file was deleted is retired (recoverable with `loci restore ID`),
    and only when this folder held that file; more than a few such deletions need
    --yes. Exit code 1 when something needs your attention (conflicts, deletions
    held back)."""
    report = loci.sync(dry_run=dry_run, confirm=yes)
    if as_json:
        print_json(report)
    else:
        _print_sync(report)
    if report.conflicts or report.needs_confirmation:
        raise click.exceptions.Exit(1)


def _print_sync(report: SyncReport) -> None:
    would = "would be " if report.dry_run else ""
    click.echo(f"{report.folder}{' (dry run: nothing changed)' if report.dry_run else ''}")
    click.echo(f"created {len(report.created)}, updated {len(report.updated)}, deleted "
               f"{len(report.deleted)}, wrote {len(report.written)}, unchanged "
               f"{report.unchanged}, conflicts {len(report.conflicts)}, left alone "
               f"{len(report.kept)}")
    for label, ids in (("created", report.created), ("updated", report.updated),
                       ("written", report.written)):
        for memory_id in ids:
            click.echo(f"{would}{label} {memory_id}")
    for memory_id in report.deleted:
        click.echo(f"{would}deleted {memory_id} (its file is gone; `loci restore "
                   f"{memory_id}` brings it back)")
    reasons: dict[str, list[str]] = {}
    for memory_id, why in report.kept:
        reasons.setdefault(why, []).append(memory_id)
    for why, ids in reasons.items():
        click.echo(f"left alone {len(ids)} ({', '.join(ids[:5])}"
                   f"{', ...' if len(ids) > 5 else ''}): {why}")
    for item, why in report.conflicts:
        click.echo(f"conflict: {item}: {why}")


@cli.command()
@click.argument("memory_id")
@json_option
@scoped
def restore(loci: Loci, memory_id: str, as_json: bool) -> None:
    """Bring back MEMORY_ID, retired by sync when its file was deleted."""
    memory = loci.restore(memory_id)
    if as_json:
        print_json(memory)
        return
    click.echo(f"restored {memory.id} [{memory.type}] {one_line(memory.content)}")


@cli.command()
@click.argument("memory_id")
@click.option("--redact-source", is_flag=True,
              help="Also remove the reply tag that wrote it from the raw reply in the log.")
@scoped
def forget(loci: Loci, memory_id: str, redact_source: bool) -> None:
    """Delete the memory MEMORY_ID with its history."""
    redacted = loci.forget(memory_id, redact_source=redact_source)
    click.echo(f"forgot {memory_id}" + (f"; redacted {redacted} raw repl"
                                        f"{'y' if redacted == 1 else 'ies'}"
                                        if redact_source else ""))


def _filters(memory_type: str | None, tags: str | None, session: str | None = None
             ) -> SearchFilters:
    types = (check_type(memory_type),) if memory_type else ()
    return SearchFilters(types=types, tags=tuple(_tags(tags)), session=session)


@cli.command()
@click.argument("query")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option("--type", "memory_type", help="Only memories of this type.")
@click.option("--tags", help="Only memories with all these tags (comma-separated).")
@click.option("--past/--current", default=None,
              help="--past: rank facts that expired or were superseded as they match; "
              "--current: leave them out (default: found, ranked below the facts that hold, "
              "unless the query asks about the past).")
@json_option
@scoped
def search(
    loci: Loci, query: str, limit: int, memory_type: str | None, tags: str | None,
    past: bool | None, as_json: bool,
) -> None:
    """Search memories for QUERY (hybrid keyword + vector; plain text, never syntax)."""
    results = loci.memory_search(query, limit, _filters(memory_type, tags), past=past)
    if as_json:
        print_json(results)
        return
    if not results:
        click.echo("no results")
    for r in results:
        was = f" ({r.status} {format_timestamp(r.until)})" if r.until and (
            r.status != "active") else ""
        click.echo(f"{r.relevance:.3f} {r.id} [{r.type}]{was} {r.summary}")


@cli.command()
@click.argument("memory_id")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0))
@click.option("--limit", default=1000, show_default=True, type=click.IntRange(1, 100_000))
@json_option
@scoped
def read(loci: Loci, memory_id: str, offset: int, limit: int, as_json: bool) -> None:
    """Read memory MEMORY_ID as markdown, paginated by characters."""
    result = loci.memory_read(memory_id, offset, limit)
    if as_json:
        print_json(result)
        return
    click.echo(result.content, nl=False)
    if result.next_offset is not None:
        click.echo(f"\n[… {result.total_chars - result.next_offset} more characters: "
                   f"--offset {result.next_offset}]")


@cli.command()
@click.argument("query")
@click.option("--session", help="Only this session.")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 1000))
@json_option
@scoped
def recall(loci: Loci, query: str, session: str | None, limit: int, as_json: bool) -> None:
    """Search conversations (archived events included) for QUERY."""
    hits = loci.search_conversation(query, session, limit)
    if as_json:
        print_json(hits)
        return
    if not hits:
        click.echo("no results")
    for h in hits:
        click.echo(f"{h.score:.3f} #{h.id} {h.session} {format_timestamp(h.timestamp)} "
                   f"{h.metadata.get('role', '')}: {one_line(h.text)}")


@cli.command()
@scoped
def reindex(loci: Loci) -> None:
    """Re-embed every memory, event and document with the configured model."""
    bar: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=max(total, 1), label="embedding", file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        count = loci.reindex(progress)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    click.echo(f"re-embedded {count} items")


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


@state.command(name="delete")
@click.argument("key")
@scoped
def state_delete(loci: Loci, key: str) -> None:
    """Delete KEY."""
    loci.state_delete(key)
    click.echo(f"deleted {key}")


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
