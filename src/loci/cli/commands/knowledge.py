"""Knowledge-base commands (``loci kb ...``) and the librarian (``loci session end``)."""

from __future__ import annotations

import sys
from typing import Any, BinaryIO

import click

from loci import Loci, ValidationError
from loci.checks import parse_tags
from loci.cli.app import cli, json_option, one_line, print_json, scoped
from loci.timeutil import format_timestamp, parse_timestamp


@cli.group()
def kb() -> None:
    """The knowledge base: documents at paths such as /profile/identity.md."""


@kb.command(name="put")
@click.argument("path")
@click.argument("source", type=click.File("rb"), default="-", metavar="[FILE|-]")
@click.option("--tags", help="Comma-separated tags (replace the stored ones).")
@json_option
@scoped
def kb_put(loci: Loci, path: str, source: BinaryIO, tags: str | None, as_json: bool) -> None:
    """Write FILE (or standard input) as the document at PATH.

    A new path is version 1; new content makes the next version and keeps the old one
    in its history. YAML front matter (title, tags) is read like `loci kb import` does.
    """
    name = str(getattr(source, "name", "<stdin>"))
    try:
        text = source.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{name}: not UTF-8 text") from exc
    result = loci.knowledge.put_text(path, text, parse_tags(tags) if tags is not None else None,
                                     source=name)
    if as_json:
        print_json(result)
        return
    doc = result.document
    click.echo(f"{result.status} {doc.path} (version {doc.version}, {len(doc.content):,} chars)")


@kb.command(name="import")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--prefix", default="/reference/", show_default=True,
              help="Folder the files go to.")
@json_option
@scoped
def kb_import(loci: Loci, directory: str, prefix: str, as_json: bool) -> None:
    """Import the markdown and text files below DIRECTORY (front matter respected)."""
    bar: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=max(total, 1), label="importing", file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        report = loci.knowledge.import_directory(directory, prefix, progress)
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    if as_json:
        print_json(report)
        return
    click.echo(f"imported {report.imported} documents into {prefix} ({len(report.created)} "
               f"new, {len(report.updated)} updated, {len(report.unchanged)} unchanged), "
               f"skipped {len(report.skipped)}")
    for file, why in report.skipped:
        click.echo(f"skipped {file}: {why}")


@kb.command(name="get")
@click.argument("path")
@click.option("--version", "version", type=click.IntRange(1), help="An earlier version.")
@json_option
@scoped
def kb_get(loci: Loci, path: str, version: int | None, as_json: bool) -> None:
    """Print the document at PATH (the latest version unless --version)."""
    document = loci.knowledge.get(path, version)
    if as_json:
        print_json(document)
    else:
        click.echo(document.content, nl=not document.content.endswith("\n"))


@kb.command(name="ls")
@click.argument("prefix", default="/")
@json_option
@scoped
def kb_ls(loci: Loci, prefix: str, as_json: bool) -> None:
    """Show the documents in folder PREFIX (default /) as a tree."""
    if as_json:
        print_json([{"path": d.path, "version": d.version, "tags": d.tags,
                     "chars": len(d.content), "updated_at": d.updated_at}
                    for d in loci.knowledge.ls(prefix)])
        return
    for line in loci.knowledge.tree(prefix).render():
        click.echo(line)


@kb.command(name="rm")
@click.argument("path")
@scoped
def kb_rm(loci: Loci, path: str) -> None:
    """Delete the document at PATH and its history."""
    loci.knowledge.rm(path)
    click.echo(f"removed {path}")


@kb.command(name="redact")
@click.argument("path")
@click.option("--version", "version", type=int, required=True,
              help="The earlier version to redact (see `loci kb history PATH`).")
@scoped
def kb_redact(loci: Loci, path: str, version: int) -> None:
    """Empty the text of an earlier version of PATH; the version stays in its history."""
    loci.knowledge.redact(path, version)
    click.echo(f"redacted {path} v{version}")


@kb.command(name="restore")
@click.argument("path")
@click.option("--at", "at", required=True, metavar="TIME",
              help="ISO 8601 time, e.g. 2026-11-24T09:00:00Z.")
@scoped
def kb_restore(loci: Loci, path: str, at: str) -> None:
    """Write PATH back as it was at TIME (as its next version; its history stays). A
    folder (PATH ending in /) restores each of its documents that existed then."""
    when = parse_timestamp(at)
    paths = [d.path for d in loci.knowledge.ls(path)] if path.endswith("/") else [path]
    restored = 0
    for each in paths:
        if path.endswith("/") and loci.knowledge.as_of(each, when) is None:
            continue  # created since
        result = loci.knowledge.restore(each, when)
        restored += 1
        click.echo(f"{each}: {result.status} as v{result.document.version}")
    if path.endswith("/"):
        click.echo(f"restored {restored} of {len(paths)} documents as of "
                   f"{format_timestamp(when)}")


@kb.command(name="search")
@click.argument("query")
@click.option("--path", "path_prefix", metavar="PREFIX", help="Only this folder.")
@click.option("--tags", help="Only documents with all these tags (comma-separated).")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 100))
@json_option
@scoped
def kb_search(
    loci: Loci, query: str, path_prefix: str | None, tags: str | None, limit: int,
    as_json: bool,
) -> None:
    """Search documents for QUERY (hybrid keyword + vector; plain text, never syntax)."""
    results = loci.search_knowledge(query, path_prefix, list(parse_tags(tags)), limit)
    if as_json:
        print_json(results)
        return
    if not results:
        click.echo("no results")
    for r in results:
        tags_text = f" [{', '.join(r.tags)}]" if r.tags else ""
        click.echo(f"{r.relevance:.3f} {r.path}{tags_text}\n      {r.summary}")


@kb.command(name="history")
@click.argument("path")
@json_option
@scoped
def kb_history(loci: Loci, path: str, as_json: bool) -> None:
    """Show PATH now and every earlier version."""
    current = loci.knowledge.get(path)
    versions = loci.knowledge.history(path)
    if as_json:
        print_json({"current": current, "versions": versions})
        return
    click.echo(f"v{current.version:<3} now  ({format_timestamp(current.updated_at)}, "
               f"{len(current.content):,} chars) {one_line(current.content, 60)}")
    for v in reversed(versions):
        click.echo(f"v{v.version:<3} ({format_timestamp(v.updated_at)}, replaced "
                   f"{format_timestamp(v.superseded_at)}, {len(v.content):,} chars) "
                   f"{one_line(v.content, 60)}")


@cli.group()
def session() -> None:
    """One session: end it (the librarian files it into the knowledge base) or erase it."""


@session.command(name="end")
@click.argument("session_id", metavar="SESSION")
@json_option
@scoped
def session_end(loci: Loci, session_id: str, as_json: bool) -> None:
    """File SESSION: a /conversations/ record, /profile/ updates and memories."""
    result = loci.end_session(session_id)
    if as_json:
        print_json(result)
        return
    if result.path is None:
        click.echo(f"nothing worth filing in {session_id}")
    else:
        counts: dict[str, int] = {}
        for finding in result.findings:
            counts[finding.kind] = counts.get(finding.kind, 0) + 1
        found = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        click.echo(f"wrote {result.path} (importance {result.importance:.2f}, "
                   f"{result.method}): {found}")
    for path, lines in result.profile.items():
        click.echo(f"updated {path} (+{len(lines)} line{'s' if len(lines) != 1 else ''})")
    saved = sum(1 for m in result.memories if m.action == "created")
    click.echo(f"memories: {saved} new, {len(result.memories) - saved} refreshed or updated")
