"""Importing a directory of markdown and text files into the knowledge base.

Each file becomes the document at ``prefix`` + its path relative to the directory
(``notes/db.md`` under ``/reference/`` → ``/reference/notes/db.md``). YAML front matter
is respected: ``title`` and other keys go to the document's metadata, ``tags`` to its
tags; the body without the front matter is the content. Hidden files and folders are
skipped, as are files that cannot be imported (not UTF-8, empty, too long, bad front
matter, a name that is not a valid path): each is reported with its reason and the
rest is imported. Files are written in batches of ``BATCH`` (one transaction each) and
embedded after each batch; re-importing unchanged files changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from loci.errors import LociError, ValidationError
from loci.knowledge.paths import check_folder, join
from loci.knowledge.service import MAX_DOCUMENT_CHARS, KnowledgeBase, NewDocument
from loci.knowledge.text import parse_front_matter

SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".txt", ".text", ".rst"})
BATCH = 500
#: Called with (files done so far, files in all).
Progress = Callable[[int, int], None]


@dataclass
class DirectoryImport:
    """What an import did, file by file."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: (file relative to the directory, why it was skipped)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def imported(self) -> int:
        return len(self.created) + len(self.updated) + len(self.unchanged)


def import_directory(
    kb: KnowledgeBase, directory: str | Path, prefix: str = "/reference/",
    progress: Progress | None = None,
) -> DirectoryImport:
    """Import every markdown and text file below ``directory`` into ``prefix``."""
    root = Path(directory).resolve()
    if not root.is_dir():
        raise ValidationError(f"{directory}: not a directory")
    folder = check_folder(prefix)
    files = sorted(_files(root))
    report = DirectoryImport()
    if progress is not None:
        progress(0, len(files))
    batch: list[NewDocument] = []
    taken: dict[str, str] = {}  # document path → the file it came from
    for done, file in enumerate(files, 1):
        relative = file.relative_to(root).as_posix()
        try:
            new = _read(file, relative, folder, root)
            if new.path in taken:  # names that differ only in Unicode normalization
                raise ValidationError(f"{taken[new.path]!r} is already imported at "
                                      f"{new.path}; rename one of the two files")
            taken[new.path] = relative
            batch.append(new)
        except ValidationError as exc:
            report.skipped.append((relative, str(exc).removeprefix(f"{relative}: ")))
        if len(batch) >= BATCH or done == len(files):
            _write(kb, batch, report)
            batch = []
        if progress is not None and (len(batch) == 0 or done == len(files)):
            progress(done, len(files))
    return report


def _files(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if any(part.startswith(".") for part in parts):
            continue
        if path.is_file() and path.suffix.lower() in SUFFIXES:
            yield path


def _read(file: Path, relative: str, folder: str, root: Path) -> NewDocument:
    try:
        path = join(folder, relative)
    except ValidationError as exc:
        raise ValidationError(f"its name does not make a valid path: {exc}") from exc
    if not file.resolve().is_relative_to(root):
        # A link out of the folder (to ~/.ssh/id_rsa, say) is not the folder's text.
        raise ValidationError("a link to a file outside the folder")
    try:
        if file.stat().st_size > MAX_DOCUMENT_CHARS * 4:
            raise ValidationError(f"larger than {MAX_DOCUMENT_CHARS:,} characters")
        text = file.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError("not UTF-8 text") from exc
    except OSError as exc:
        raise ValidationError(f"cannot read it: {exc.strerror or exc}") from exc
    front, body = parse_front_matter(text.replace("\r\n", "\n"), relative)
    metadata = {**front.metadata, "source_file": relative}
    if front.title:
        metadata["title"] = front.title
    if not body.strip():
        raise ValidationError("no content after the front matter")
    if len(body) > MAX_DOCUMENT_CHARS:
        raise ValidationError(f"longer than {MAX_DOCUMENT_CHARS:,} characters")
    return NewDocument(path, body, front.tags, metadata)


def _write(kb: KnowledgeBase, batch: list[NewDocument], report: DirectoryImport) -> None:
    if not batch:
        return
    try:
        results = kb.put_many(batch)
    except LociError:
        # One bad document fails its whole batch: write the batch one by one instead,
        # so only the bad file is skipped.
        results = []
        for new in batch:
            try:
                results += kb.put_many([new])
            except LociError as exc:
                report.skipped.append((new.path, str(exc)))
    for result in results:
        getattr(report, result.status).append(result.document.path)
