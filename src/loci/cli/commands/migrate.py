"""``loci migrate``: copy a whole store to another backend (SQLite ↔ PostgreSQL).

Every scope is copied with its ids, flags, versions and vectors, then the API keys and
the store's meta (the embedding model), so the copy answers exactly like the original.
The target must be empty: event ids are global, and merging two stores is not a copy.

The target is marked an unfinished copy of its source before anything is copied, and
complete only at the end: until then no one opens it as a store (``open_store``
refuses it, naming the command that finishes it). A rerun resumes an interrupted copy:
a scope's rows are imported in one transaction, so a scope the target holds came
whole, and only its vectors (written after) are written again, unless the source
changed since: a user with a scope written to or erased in between is erased from the
target and copied again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import click

from loci import Scope, Store, ValidationError, open_store
from loci.cli.app import cli


def copy_store(
    source: Store, target: Store, progress: Callable[[str], None] = lambda _: None
) -> dict[str, int]:
    """Copy everything in ``source`` into ``target`` (empty, or an unfinished copy of
    ``source`` to resume); returns counts."""
    resuming = _check_target(source, target)
    target.mark_copy(source.url)
    counts = {"scopes": 0, "events": 0, "memories": 0, "documents": 0, "api_keys": 0}
    copied = _still_whole(source, target) if resuming else set()
    for scope in source.list_scopes():
        data = source.export_scope(scope)
        if scope in copied:
            target.set_vectors_of(data)
        else:
            try:
                target.import_scope(data)
            except ValidationError as exc:  # which user's data the target cannot take
                raise ValidationError(f"user {scope.tenant!r}, agent {scope.agent!r}: "
                                      f"{exc}") from exc
        counts["scopes"] += 1
        counts["events"] += len(data.events)
        counts["memories"] += len(data.memories)
        counts["documents"] += len(data.documents)
        progress(f"{scope.tenant}/{scope.agent}: {len(data.events)} events, "
                 f"{len(data.memories)} memories, {len(data.documents)} documents"
                 + (" (copied before; vectors written again)" if scope in copied else ""))
    have = {key.id for key, _ in target.export_api_keys()}
    for key, secret_hash in source.export_api_keys():
        if key.id not in have:
            target.add_api_key(key, secret_hash)
        counts["api_keys"] += 1
    # Meta last: the embedding model is recorded once its vectors are all there.
    for name, value in source.list_meta().items():
        if name not in source.own_meta:
            target.set_meta(name, value)
    target.mark_copy(None)
    return counts


def _still_whole(source: Store, target: Store) -> set[Scope]:
    """The scopes an interrupted copy holds as the source still has them. A user with a
    scope the source changed or no longer has since is erased from the target, to be
    copied again (or not at all: an erasure in between is not undone by the copy)."""
    present = set(source.list_scopes())
    held = target.list_scopes()
    stale = {scope.tenant for scope in held if scope not in present or replace(
        source.export_scope(scope), vectors={}) != replace(
        target.export_scope(scope), vectors={})}
    for tenant in stale:
        target.erase_tenant(tenant)
    return {scope for scope in held if scope.tenant not in stale}


def _check_target(source: Store, target: Store) -> bool:
    """Whether ``target`` is an unfinished copy of ``source`` (to resume); an error if
    it holds anything else."""
    unfinished = target.copying_from()
    if unfinished is not None and unfinished != source.url:
        raise ValidationError(f"the target store {target.url} is an unfinished copy of "
                              f"{unfinished}, not of {source.url}: finish that copy, or "
                              "migrate into a new, empty store")
    if unfinished is None and (target.list_scopes() or target.export_api_keys()):
        raise ValidationError(f"the target store {target.url} is not empty; "
                              "migrate into a new, empty store")
    return unfinished is not None


@cli.command()
@click.option("--from", "source_url", required=True, metavar="URL",
              help="Store to copy from (sqlite:///PATH or postgresql://…).")
@click.option("--to", "target_url", required=True, metavar="URL",
              help="Empty store to copy into (or one an interrupted copy left: resumed).")
def migrate(source_url: str, target_url: str) -> None:
    """Copy a whole store between backends, losslessly (every tenant and agent)."""
    if source_url == target_url:
        raise click.UsageError("--from and --to name the same store")
    path = source_url.removeprefix("sqlite:///")
    if path != source_url and path != ":memory:" and not Path(path).is_file():
        raise click.UsageError(f"no SQLite store at {path} to copy from")  # not a new one
    source = open_store(source_url)
    try:
        target = open_store(target_url, migrating=True)
        try:
            counts = copy_store(source, target, progress=lambda line: click.echo(line))
        finally:
            target.close()
    finally:
        source.close()
    click.echo(", ".join(f"{n} {what}" for what, n in counts.items()) + " copied")
