"""``loci migrate``: copy a whole store to another backend (SQLite ↔ PostgreSQL).

Every scope is copied with its ids, flags, versions and vectors, then the API keys and
the store's meta (the embedding model), so the copy answers exactly like the original.
The target must be empty: event ids are global, and merging two stores is not a copy.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from loci import Store, open_store
from loci.cli.app import cli
from loci.errors import ValidationError


def copy_store(
    source: Store, target: Store, progress: Callable[[str], None] = lambda _: None
) -> dict[str, int]:
    """Copy everything in ``source`` into the empty ``target``; returns counts."""
    if target.list_scopes() or target.export_api_keys():
        raise ValidationError(f"the target store {target.url} is not empty; "
                              "migrate into a new, empty store")
    counts = {"scopes": 0, "events": 0, "memories": 0, "documents": 0, "api_keys": 0}
    for scope in source.list_scopes():
        data = source.export_scope(scope)
        target.import_scope(data)
        counts["scopes"] += 1
        counts["events"] += len(data.events)
        counts["memories"] += len(data.memories)
        counts["documents"] += len(data.documents)
        progress(f"{scope.tenant}/{scope.agent}: {len(data.events)} events, "
                 f"{len(data.memories)} memories, {len(data.documents)} documents")
    for key, secret_hash in source.export_api_keys():
        target.add_api_key(key, secret_hash)
        counts["api_keys"] += 1
    # Meta last: the embedding model is recorded once its vectors are all there.
    for name, value in source.list_meta().items():
        target.set_meta(name, value)
    return counts


@cli.command()
@click.option("--from", "source_url", required=True, metavar="URL",
              help="Store to copy from (sqlite:///PATH or postgresql://…).")
@click.option("--to", "target_url", required=True, metavar="URL",
              help="Empty store to copy into.")
def migrate(source_url: str, target_url: str) -> None:
    """Copy a whole store between backends, losslessly (every tenant and agent)."""
    if source_url == target_url:
        raise click.UsageError("--from and --to name the same store")
    source = open_store(source_url)
    try:
        target = open_store(target_url)
        try:
            counts = copy_store(source, target, progress=lambda line: click.echo(line))
        finally:
            target.close()
    finally:
        source.close()
    click.echo(", ".join(f"{n} {what}" for what, n in counts.items()) + " copied")
