"""``loci sync``: bring edits made to the markdown mirror back into the store.

For each file: unchanged files are skipped; a file edited since Loci last wrote it
(its ``updatedAt`` still equals the stored one) updates the memory, keeping the old
version in history; a file whose memory *also* changed in the store is a conflict and
neither side is touched; a new file becomes a new memory.

A missing file deletes its memory only when this very directory (its marker's id) held
it, the directory still holds other memory files, and the deletions are few (or
confirmed): a directory of another store or scope is refused, an empty or new one
deletes nothing, and a deleted memory is retired (expired, with the reason in its
history), never erased, so ``restore`` brings it back. Memories this directory never
held get their file, unless the directory holds no memory files at all (it may be the
wrong folder: running from another directory must not scatter copies).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from loci.errors import ConflictError, LociError
from loci.memory.markdown import MemoryFile, parse
from loci.memory.mirror import Mirror, mirrors_of, mirrors_of_metadata, same_content, was_mirrored
from loci.memory.service import MemoryService
from loci.memory.types import typo_of
from loci.models import Memory

#: Deletions beyond these need confirmation: more than this many ...
CONFIRM_OVER = 5
#: ... or more than this share of the memories the directory held (a single one never).
CONFIRM_SHARE = 0.1


@dataclass
class SyncReport:
    """What a sync did (or, with ``dry_run``, would do). ``deleted`` memories are
    retired, not erased; ``kept`` lists missing files whose memories were left alone,
    with why; ``needs_confirmation`` when deletions were held back for ``--yes``."""

    folder: str = ""
    dry_run: bool = False
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)
    unchanged: int = 0
    needs_confirmation: bool = False


def sync(service: MemoryService, mirror: Mirror, *, dry_run: bool = False,
         confirm: bool = False) -> SyncReport:
    """Apply the mirror directory's edits to the store (nothing, with ``dry_run``);
    ``confirm`` allows more deletions than ``CONFIRM_OVER``/``CONFIRM_SHARE``."""
    marker = mirror.marker()
    if marker is not None and (problem := mirror.owner_problem(marker)):
        raise ConflictError(f"{problem}: nothing changed. Sync from the workspace that "
                            "mirrors this store, or set memory_mirror to another folder")
    run = _Run(service, mirror, dry_run, marker.id if marker else None)
    files = mirror.files()
    if files and not dry_run:
        run.here = _claimed(mirror)
    for stem, path in files.items():
        run.take_file(stem, path)
    missing = [m for m in run.stored.values()
               if m.id not in run.seen and not m.is_expired(run.now)]
    run.missing(missing, holds_files=bool(files), confirm=confirm)
    return run.report


class _Run:
    """One sync's state: the stored memories, the files seen, the report."""

    def __init__(self, service: MemoryService, mirror: Mirror, dry_run: bool,
                 here: str | None) -> None:
        self.service, self.mirror, self.dry_run, self.here = service, mirror, dry_run, here
        self.now: datetime = service.clock()
        self.stored = {m.id: m for m in service.store.list_memories(service.scope)}
        self.seen: set[str] = set()
        self.report = SyncReport(folder=str(mirror.directory), dry_run=dry_run)

    def take_file(self, stem: str, path: Path) -> None:
        try:
            found = parse(path.read_text(encoding="utf-8"))
        except (LociError, OSError, UnicodeDecodeError) as exc:
            self.seen.add(stem)  # never forget a memory because its file is unreadable
            self.report.conflicts.append(
                (path.name, f"unreadable: {' '.join(str(exc).split())}"))
            return
        memory_id = found.id or stem
        self.seen.add(memory_id)
        if found.type and (meant := typo_of(found.type, self.service.ttls)):
            self.report.conflicts.append(
                (path.name, f"type {found.type!r} is not a memory type: did you mean "
                            f"{meant!r}? Nothing changed (a misspelt type would change "
                            "when the memory expires)"))
            return
        memory = self.stored.get(memory_id)
        if memory is None:
            if found.body:
                self._create(found, path)
        elif same_content(found, memory):
            self.report.unchanged += 1
            self._held_here(memory)
        elif not found.body.strip():
            self.report.conflicts.append(
                (path.name, "holds no text: nothing changed (delete the file to delete "
                            "the memory)"))
        elif found.updated_at in (memory.updated_at, None):
            self._update(memory, found, path.name)
        else:
            self.report.conflicts.append(
                (memory_id, f"{path.name} and the store both changed since the last sync; "
                            "edit the file to the wanted text and remove its updatedAt "
                            "line to take the file's version"))

    def missing(self, memories: list[Memory], *, holds_files: bool, confirm: bool) -> None:
        here = self.here
        gone = [m for m in memories if here is not None and here in mirrors_of(m)]
        gone_ids = {m.id for m in gone}
        for memory in memories:
            if memory.id in gone_ids:
                continue
            if holds_files or not was_mirrored(memory):
                self._write(memory)
            else:
                self.report.kept.append((memory.id, f"its file is in another folder; "
                                         f"{self.mirror.directory} holds no memory files"))
        if not gone:
            return
        held = sum(1 for m in self.stored.values()
                   if here in mirrors_of(m) and not m.is_expired(self.now))
        reason = _why_not_delete(len(gone), held, holds_files=holds_files, confirm=confirm)
        if reason is not None:
            self.report.needs_confirmation = holds_files
            self.report.kept.extend((m.id, reason) for m in gone)
            return
        for memory in gone:
            if not self.dry_run:
                self.service.retire(memory.id, f"its file was deleted from "
                                               f"{self.mirror.directory} (loci sync)")
            self.report.deleted.append(memory.id)

    def _create(self, found: MemoryFile, path: Path) -> None:
        if self.dry_run:
            self.report.created.append(f"(new, from {path.name})")
            return
        result = self.service.save(found.body, found.type or "project_context", found.tags,
                                   source=f"file:{path.name}")
        if path != self.mirror.path(result.memory.id):
            path.unlink()
        self.mirror.write(self._held_here(result.memory))
        self.report.created.append(result.memory.id)

    def _update(self, memory: Memory, found: MemoryFile, name: str) -> None:
        self.report.updated.append(memory.id)
        if self.dry_run:
            return
        result = self.service.update(
            memory.id, found.body, found.type or memory.type, found.tags,
            reason=f"edited in {name}",
            expires_at=found.expires_at if found.expires_stated else "by type")
        self.mirror.write(self._held_here(result.memory))

    def _write(self, memory: Memory) -> None:
        self.report.written.append(memory.id)
        if self.dry_run:
            return
        self.here = _claimed(self.mirror)
        self.mirror.write(self._held_here(memory))

    def _held_here(self, memory: Memory) -> Memory:
        """``memory`` marked as held by this directory (stored when that is new)."""
        if self.here is None or self.dry_run or self.here in mirrors_of(memory):
            return memory
        marked = replace(memory, metadata=_with_mirror(memory.metadata, self.here))
        self.service.store.put_memory(self.service.scope, marked)
        return marked


def _claimed(mirror: Mirror) -> str:
    marker = mirror.claim()
    if marker is None:  # another process marked the directory since sync checked it
        raise ConflictError(f"{mirror.directory} now mirrors another store or scope")
    return marker.id


def _with_mirror(metadata: dict[str, Any], here: str) -> dict[str, Any]:
    """``metadata`` with ``here`` among its mirrors (the legacy flag dropped)."""
    kept = {k: v for k, v in metadata.items() if k not in ("mirrored", "mirrors")}
    return {**kept, "mirrors": [*mirrors_of_metadata(metadata), here]}


def _why_not_delete(count: int, held: int, *, holds_files: bool, confirm: bool) -> str | None:
    """Why ``count`` memories whose files are gone are not deleted, or None to delete."""
    if not holds_files:
        return ("its folder holds no memory files at all (emptied, moved or unmounted?): "
                "nothing deleted; use `loci forget ID` to delete a memory")
    many = count > 1 and (count > CONFIRM_OVER or count > CONFIRM_SHARE * held)
    if many and not confirm:
        return (f"{count} of the {held} memories this folder held lost their files: "
                "deletions held back; rerun with --yes to delete them (they stay "
                "recoverable with `loci restore ID`)")
    return None

