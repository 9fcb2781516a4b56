"""The editable markdown mirror: every memory is also ``memory/{id}.md``.

Writes through the API update the file unless the file holds edits that were never
synced (a human changed it): then the file is left alone and ``loci sync`` reports the
conflict instead of overwriting either side.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from loci.errors import ValidationError
from loci.memory.markdown import MemoryFile, parse, render
from loci.models import Memory, Scope

_ID = re.compile(r"^mem_[A-Za-z0-9_-]{1,64}$")


class Mirror:
    """Memory files of one scope under ``root`` (``memory/`` or
    ``memory/{tenant}/{agent}/`` for scopes other than the default one)."""

    def __init__(self, root: Path, scope: Scope) -> None:
        self.root = root
        base = root / "memory"
        self.directory = base if scope == Scope() else base / scope.tenant / scope.agent
        if scope != Scope() and not _safe_parts(scope):
            raise ValidationError("user and agent names used in file paths must be plain")

    def path(self, memory_id: str) -> Path:
        if not _ID.match(memory_id):
            raise ValidationError(f"invalid memory id {memory_id!r}")
        return self.directory / f"{memory_id}.md"

    def read(self, memory_id: str) -> MemoryFile | None:
        path = self.path(memory_id)
        return parse(path.read_text(encoding="utf-8")) if path.is_file() else None

    def write(self, memory: Memory, previous: Memory | None = None) -> bool:
        """Write the memory's file; returns False when unsynced edits were kept."""
        if previous is not None and self.has_unsynced_edits(previous):
            return False
        self._make_directory()
        _atomic_write(self.path(memory.id), render(memory))
        return True

    def remove(self, memory_id: str) -> None:
        self.path(memory_id).unlink(missing_ok=True)

    def remove_all(self, memory_ids: Iterable[str]) -> None:
        """Remove the files of ``memory_ids``, then this scope's directories if empty."""
        for memory_id in memory_ids:
            self.remove(memory_id)
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
        """True when the file differs from ``stored`` (the version it was written from)."""
        found = self.read(stored.id)
        return found is not None and not same_content(found, stored)

    def files(self) -> dict[str, Path]:
        """Memory files by file stem."""
        if not self.directory.is_dir():
            return {}
        return {p.stem: p for p in sorted(self.directory.glob("*.md"))}


def same_content(found: MemoryFile, memory: Memory) -> bool:
    return (found.body, found.type or memory.type, found.tags) == (
        memory.content, memory.type, memory.tags)


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
