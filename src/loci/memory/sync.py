"""``loci sync``: bring edits made to the markdown mirror back into the store.

For each file: unchanged files are skipped; a file edited since Loci last wrote it
(its ``updatedAt`` still equals the stored one) updates the memory, keeping the old
version in history; a file whose memory *also* changed in the store is a conflict and
neither side is touched; a new file becomes a new memory. A memory whose file was
deleted (and which had been mirrored) is forgotten; one never mirrored gets its file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from loci.errors import LociError
from loci.memory.markdown import parse
from loci.memory.mirror import Mirror, same_content
from loci.memory.service import MemoryService


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    unchanged: int = 0


def sync(service: MemoryService, mirror: Mirror) -> SyncReport:
    report = SyncReport()
    stored = {m.id: m for m in service.store.list_memories(service.scope)}
    seen: set[str] = set()
    for stem, path in mirror.files().items():
        try:
            found = parse(path.read_text(encoding="utf-8"))
        except (LociError, OSError, UnicodeDecodeError) as exc:
            seen.add(stem)  # never forget a memory because its file is unreadable
            report.conflicts.append((path.name, f"unreadable: {' '.join(str(exc).split())}"))
            continue
        memory_id = found.id or stem
        memory = stored.get(memory_id)
        seen.add(memory_id)
        if memory is None:
            if not found.body:
                continue
            result = service.save(found.body, found.type or "project_context", found.tags,
                                  source=f"file:{path.name}")
            if path != mirror.path(result.memory.id):
                path.unlink()
            mirror.write(result.memory)
            report.created.append(result.memory.id)
        elif same_content(found, memory):
            report.unchanged += 1
        elif found.updated_at in (memory.updated_at, None):
            result = service.update(memory_id, found.body, found.type or memory.type,
                                    found.tags, reason=f"edited in {path.name}")
            mirror.write(result.memory)
            report.updated.append(memory_id)
        else:
            report.conflicts.append(
                (memory_id, f"{path.name} and the store both changed since the last sync; "
                            "edit the file to the wanted text and remove its updatedAt "
                            "line to take the file's version")
            )
    for memory_id, memory in stored.items():
        if memory_id in seen:
            continue
        if memory.metadata.get("mirrored"):
            service.forget(memory_id)
            report.deleted.append(memory_id)
        else:
            marked = replace(memory, metadata={**memory.metadata, "mirrored": True})
            service.store.put_memory(service.scope, marked)
            mirror.write(marked)
            report.written.append(memory_id)
    return report
