"""The editable markdown mirror: every memory is also ``memory/{id}.md``.

Writes through the API update the file unless the file holds edits that were never
synced (a human changed it): then the file is left alone and ``loci sync`` reports the
conflict instead of overwriting either side.

Each mirror directory carries a marker (``.loci-mirror.json``): its own id and the
store and scope it mirrors. A memory remembers the id of the directory its file was
written to, so ``loci sync`` can tell a file the user deleted from a directory that
never held it (another workspace, another store, a moved or unmounted folder).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loci.errors import LociError, ValidationError
from loci.memory.markdown import MemoryFile, parse, render
from loci.models import SHARED_AGENT, Memory, Scope
from loci.store.base import Store

_ID = re.compile(r"^mem_[A-Za-z0-9_-]{1,64}$")
MARKER = ".loci-mirror.json"
#: The meta key under which a store keeps the id that names it in mirror markers.
STORE_ID = "store_id"


@dataclass(frozen=True)
class Marker:
    """What a mirror directory says about itself."""

    id: str
    store: str
    tenant: str
    agent: str


class Mirror:
    """Memory files of one scope under ``root``: ``memory/``, ``memory/{tenant}/`` for a
    user's shared memories (``memory.scopes``) or ``memory/{tenant}/{agent}/``."""

    def __init__(self, root: Path, scope: Scope, store: Store | None = None) -> None:
        self.root, self.scope, self.store = root, scope, store
        base = root / "memory"
        self.directory = base if scope == Scope() else base / scope.tenant
        if scope != Scope() and scope.agent != SHARED_AGENT:
            self.directory /= scope.agent
        if scope != Scope() and not _safe_parts(scope):
            raise ValidationError("user and agent names used in file paths must be plain")
        self._store_id: str | None = None

    @property
    def store_id(self) -> str:
        """The id of the store this mirror belongs to (claimed on first use)."""
        if self._store_id is None:
            if self.store is None:
                raise ValidationError("this mirror was opened without its store")
            self._store_id = self.store.claim_meta(STORE_ID, uuid.uuid4().hex)
        return self._store_id

    def marker(self) -> Marker | None:
        """The directory's marker; None when it has none or it cannot be read."""
        try:
            found = json.loads((self.directory / MARKER).read_text(encoding="utf-8"))
            return Marker(*(str(found[k]) for k in ("id", "store", "tenant", "agent")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def claim(self) -> Marker | None:
        """The directory's marker, created (with the directory) when it has none; None
        when it belongs to another store or scope (two stores sharing one home): then
        nothing of this store is written there."""
        found = self.marker()
        if found is not None:
            return None if self.owner_problem(found) else found
        self._make_directory()
        made = Marker(uuid.uuid4().hex, self.store_id, self.scope.tenant, self.scope.agent)
        _atomic_write(self.directory / MARKER, json.dumps(made.__dict__, indent=1) + "\n")
        return made

    def owner_problem(self, marker: Marker) -> str | None:
        """Why ``marker`` is not this store's and scope's, or None when it is."""
        if marker.store != self.store_id:
            return f"{self.directory} mirrors another store (id {marker.store})"
        if (marker.tenant, marker.agent) != (self.scope.tenant, self.scope.agent):
            return (f"{self.directory} mirrors user {marker.tenant!r}, agent "
                    f"{marker.agent!r}, not this scope")
        return None

    def path(self, memory_id: str) -> Path:
        if not _ID.match(memory_id):
            raise ValidationError(f"invalid memory id {memory_id!r}")
        return self.directory / f"{memory_id}.md"

    def read(self, memory_id: str) -> MemoryFile | None:
        path = self.path(memory_id)
        return parse(path.read_text(encoding="utf-8")) if path.is_file() else None

    def write(self, memory: Memory, previous: Memory | None = None) -> bool:
        """Write the memory's file; returns False when unsynced edits were kept or the
        directory is another store's."""
        if previous is not None and self.has_unsynced_edits(previous):
            return False
        if self.store is not None and self.claim() is None:
            return False
        self._make_directory()
        _atomic_write(self.path(memory.id), render(memory))
        return True

    def remove(self, memory_id: str) -> None:
        self.path(memory_id).unlink(missing_ok=True)

    def remove_all(self, memory_ids: Iterable[str]) -> None:
        """Remove the files of ``memory_ids`` (and the marker), then this scope's
        directories if empty."""
        for memory_id in memory_ids:
            self.remove(memory_id)
        if not self.files():
            (self.directory / MARKER).unlink(missing_ok=True)
        directory = self.directory
        while directory != self.root and directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
            directory = directory.parent

    def _make_directory(self) -> None:
        """The scope's directory and those above it up to ``root``, private to the
        owner when created (they are named after users and agents)."""
        missing = [d for d in (self.directory, *self.directory.parents) if not d.exists()]
        self.root.mkdir(parents=True, exist_ok=True)
        for directory in reversed(missing):
            directory.mkdir(mode=0o700, exist_ok=True)

    def has_unsynced_edits(self, stored: Memory) -> bool:
        """True when the file differs from ``stored`` (the version it was written from);
        a file that no longer reads (another encoding, broken front matter) is the
        user's edit too: kept, for sync to report."""
        try:
            found = self.read(stored.id)
        except (LociError, OSError, UnicodeDecodeError):
            return True
        return found is not None and not same_content(found, stored)

    def files(self) -> dict[str, Path]:
        """Memory files by file stem."""
        if not self.directory.is_dir():
            return {}
        return {p.stem: p for p in sorted(self.directory.glob("*.md"))}


def mirrors_of_metadata(metadata: Mapping[str, Any]) -> list[str]:
    """The ids of the mirror directories a memory's metadata says held its file."""
    held = metadata.get("mirrors")
    return [m for m in held if isinstance(m, str)] if isinstance(held, list) else []


def mirrors_of(memory: Memory) -> list[str]:
    return mirrors_of_metadata(memory.metadata)


def was_mirrored(memory: Memory) -> bool:
    """Whether some directory held the memory's file (``mirrored`` before markers)."""
    return bool(mirrors_of(memory)) or memory.metadata.get("mirrored") is True


def same_content(found: MemoryFile, memory: Memory) -> bool:
    return (found.body, found.type or memory.type, found.tags) == (
        memory.content, memory.type, memory.tags) and (
        not found.expires_stated or found.expires_at == memory.expires_at)


def _safe_parts(scope: Scope) -> bool:
    return all(part not in ("", ".", "..") and "/" not in part and "\\" not in part
               for part in (scope.tenant, scope.agent))


def _atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a crash never leaves half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
