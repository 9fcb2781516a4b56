"""The knowledge base of one scope: documents at paths, with tags, versions
and hybrid search.

- ``put`` creates a document or writes its next version (the old one stays in its
  history); writing the same content, tags and metadata again changes nothing;
- ``get`` returns the latest version (or an earlier one), ``history`` every earlier one;
- ``ls`` lists a folder, ``tree`` shows it as a tree, ``rm`` deletes a document and its
  history;
- ``search`` is hybrid (keyword + vector via the retriever) within a folder and tags;
  ``search_knowledge`` and ``read_document`` are the agent's tools.

Every path goes through :mod:`loci.knowledge.paths` first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from loci.checks import check_json, check_text, clean_tags
from loci.errors import NotFoundError, ValidationError
from loci.indexing import Indexer
from loci.knowledge.paths import check_folder, check_path
from loci.knowledge.text import parse_front_matter
from loci.knowledge.tools import DocumentPage, DocumentSummary, page, to_summary
from loci.knowledge.tree import Node, build_tree
from loci.models import Document, DocumentVersion, Scope, SearchHit
from loci.retriever import Retriever
from loci.store.base import SearchFilters, Store
from loci.timeutil import Clock, format_timestamp

if TYPE_CHECKING:
    from loci.knowledge.ingest import DirectoryImport

#: The metadata key of a redacted version: when it was redacted.
REDACTED = "redacted_at"

MAX_DOCUMENT_CHARS = 2_000_000
MAX_RESULTS = 100
#: Tag filters are applied to fused hits: widen the pool up to this many to fill a page.
MAX_TAG_POOL = 1_000

Status = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class PutResult:
    """The stored document and what writing it did."""

    document: Document
    status: Status


@dataclass(frozen=True)
class NewDocument:
    """A document to write with :meth:`KnowledgeBase.put_many`. ``None`` tags or
    metadata keep those of the stored version (none for a new document)."""

    path: str
    content: str
    tags: Sequence[str] | None = None
    metadata: Mapping[str, Any] | None = None
    #: The content SHA-256 the writer last saw ("" for no document): a newer stored
    #: version is a ``ConflictError`` instead of being replaced.
    expected_sha256: str | None = None


class KnowledgeBase:
    """Documents of one scope: put, get, ls, rm, history, search."""

    def __init__(
        self, store: Store, scope: Scope, retriever: Retriever, indexer: Indexer | None,
        clock: Clock,
    ) -> None:
        self.store, self.scope, self.retriever = store, scope, retriever
        self.indexer, self.clock = indexer, clock

    # -- writing ------------------------------------------------------------------
    def put(
        self, path: str, content: str, tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None, *, allow_empty: bool = False,
        expected_sha256: str | None = None,
    ) -> PutResult:
        """Create the document at ``path`` or write its next version; ``None`` tags or
        metadata keep the stored ones. Empty content is refused unless ``allow_empty``
        (an empty file of the memory tool). With ``expected_sha256`` (``Document.sha256``
        of what the writer read, "" for none) a newer version is a ``ConflictError``."""
        new = NewDocument(path, content, tags, metadata, expected_sha256)
        return self.put_many([new], allow_empty=allow_empty)[0]

    def put_text(self, path: str, text: str, tags: Sequence[str] | None = None, *,
                 source: str = "<document>") -> PutResult:
        """``put`` a document written as a file: its YAML front matter (title, tags) read
        as :meth:`import_directory` reads it, and then what the document is (``tags:
        []`` clears its tags, a title left out is gone); a file without front matter
        keeps the stored ones. ``tags`` given replace the front matter's. ``source``
        names the text in errors."""
        front, body = parse_front_matter(text, source)
        stated = body != text  # the file has front matter
        metadata = {**front.metadata, "title": front.title} if front.title else front.metadata
        chosen = tags if tags is not None else front.tags if stated else None
        return self.put(path, body, tags=chosen, metadata=metadata if stated else None)

    def import_directory(
        self, directory: str | Path, prefix: str = "/reference/",
        progress: Callable[[int, int], None] | None = None,
    ) -> DirectoryImport:
        """Import every markdown and text file below ``directory`` into ``prefix``
        (``progress`` is called with files done and files in all)."""
        from loci.knowledge.ingest import import_directory  # ingest builds on this module

        return import_directory(self, directory, prefix, progress)

    def put_many(self, documents: Sequence[NewDocument], *, embed: bool = True,
                 allow_empty: bool = False) -> list[PutResult]:
        """Write several documents in one transaction: all are validated first, so a
        bad one stores nothing. ``embed=False`` leaves embedding to a later call of
        :meth:`embed_pending` (bulk imports embed once per batch)."""
        now = self.clock()
        checked = [(check_path(new.path), new) for new in documents]
        before = {path: self.store.get_document(self.scope, path) for path, _ in checked}
        drafts: dict[str, Document] = {}
        for path, new in checked:
            content = _check_content(path, new.content, allow_empty)
            old = before[path]
            tags = clean_tags(new.tags) if new.tags is not None else old.tags if old else ()
            if new.metadata is not None:
                check_json(f"{path}: metadata", new.metadata)
            metadata = dict(new.metadata if new.metadata is not None
                            else old.metadata if old else {})
            drafts[path] = Document(path, content, tags, 1, now, now, metadata)
        expected = {path: new.expected_sha256 for path, new in checked
                    if new.expected_sha256 is not None}
        stored = self.store.put_documents(self.scope, list(drafts.values()), expected)
        if embed and self.indexer is not None:
            self.indexer.embed_later()
        return [PutResult(doc, _status(before[doc.path], doc)) for doc in stored]

    def embed_pending(self) -> int:
        """Embed documents written without vectors; returns how many."""
        if self.indexer is None:
            return 0
        return self.indexer.embed_pending("document", self.scope)

    def rm(self, path: str) -> None:
        """Delete the document at ``path`` and its history."""
        path = check_path(path)
        if not self.store.delete_document(self.scope, path):
            raise NotFoundError(f"no document {path!r} (list the folder to see what exists)")

    def restore(self, path: str, at: datetime) -> PutResult:
        """Write the version ``path`` had at ``at`` as its next version (nothing of its
        history is lost); a ``ConflictError`` if it changes meanwhile."""
        current = self.get(path)
        old = self.as_of(path, at)
        if old is None:
            raise NotFoundError(f"{path} did not exist at {format_timestamp(at)}")
        if REDACTED in old.metadata:
            raise ValidationError(f"{path} v{old.version}, its version at "
                                  f"{format_timestamp(at)}, was redacted")
        return self.put(path, old.content, old.tags, old.metadata,
                        expected_sha256=current.sha256)

    def redact(self, path: str, version: int) -> DocumentVersion:
        """Empty the text and tags of an earlier version of ``path``: the version stays
        in the history (marked ``redacted_at`` in its metadata), its text is gone from
        disk. The current version cannot be redacted: write a new one first."""
        current = self.get(path)
        if version == current.version:
            raise ValidationError(f"v{version} is the current version of {path}: write a "
                                  "new version first, then redact this one")
        when = format_timestamp(self.clock())
        if not 0 < version < current.version or not self.store.redact_document_version(
                self.scope, current.path, version, {REDACTED: when}):
            raise NotFoundError(f"{path} has no earlier version {version} (see its history)")
        return next(v for v in self.history(path) if v.version == version)

    # -- reading ------------------------------------------------------------------
    def as_of(self, path: str, at: datetime) -> Document | None:
        """The document at ``path`` as it was at ``at``, or None if it did not exist
        then (or has been deleted since, history and all)."""
        current = self.find(path)
        if current is None or current.updated_at <= at:
            return current
        for version in self.store.document_history(self.scope, check_path(path)):
            if version.updated_at <= at < version.superseded_at:
                return _as_document(version)
        return None

    def get(self, path: str, version: int | None = None) -> Document:
        """The latest version of the document at ``path``, or its ``version``."""
        path = check_path(path)
        document = self.store.get_document(self.scope, path)
        if document is None:
            raise NotFoundError(f"no document {path!r} (list the folder to see what exists)")
        if version is None or version == document.version:
            return document
        for old in self.store.document_history(self.scope, path):
            if old.version == version:
                return _as_document(old)
        known = [v.version for v in self.store.document_history(self.scope, path)]
        raise NotFoundError(f"{path} has no version {version} (versions: "
                            f"{', '.join(map(str, [*known, document.version]))})")

    def find(self, path: str) -> Document | None:
        """The document at ``path``, or None."""
        return self.store.get_document(self.scope, check_path(path))

    def history(self, path: str) -> list[DocumentVersion]:
        """Earlier versions of the document at ``path``, oldest first."""
        self.get(path)
        return self.store.document_history(self.scope, check_path(path))

    def ls(self, prefix: str | None = "/") -> list[Document]:
        """Documents in the folder ``prefix`` and below, by path."""
        return self.store.list_documents(self.scope, check_folder(prefix))

    def tree(self, prefix: str | None = "/") -> Node:
        folder = check_folder(prefix)
        return build_tree(self.store.list_documents(self.scope, folder), folder)

    # -- search -------------------------------------------------------------------
    def search(
        self, query: str, *, path_prefix: str | None = None, tags: Sequence[str] = (),
        limit: int = 5,
    ) -> list[SearchHit]:
        """Hybrid search of documents in ``path_prefix`` carrying all of ``tags``."""
        if not isinstance(query, str):
            raise ValidationError("a search query must be text")
        if not 1 <= limit <= MAX_RESULTS:
            raise ValidationError(f"limit must be between 1 and {MAX_RESULTS}")
        folder = check_folder(path_prefix)
        wanted = clean_tags(tags)
        filters = SearchFilters(path_prefix=None if folder == "/" else folder, tags=wanted)
        now = self.clock()
        pool = limit if not wanted else max(limit * 4, 20)
        while True:
            hits = self.retriever.search(self.scope, "document", query, limit=pool,
                                         filters=filters, now=now)
            kept = [h for h in hits if set(wanted) <= set(h.metadata.get("tags", ()))]
            if len(kept) >= limit or len(hits) < pool or pool >= MAX_TAG_POOL:
                return kept[:limit]
            pool = min(pool * 4, MAX_TAG_POOL)

    def search_knowledge(
        self, query: str, path_filter: str | None = None, tags: Sequence[str] | None = None,
        top_k: int = 5,
    ) -> list[DocumentSummary]:
        """``search_knowledge``: summaries with paths and relevance."""
        hits = self.search(query, path_prefix=path_filter, tags=tags or (), limit=top_k)
        documents = {d.path: d for d in self.store.get_documents(self.scope,
                                                                 [h.id for h in hits])}
        return [to_summary(hit, documents[hit.id], query) for hit in hits
                if hit.id in documents]

    def read_document(self, path: str, offset: int = 0, limit: int = 10_000) -> DocumentPage:
        """``read_document``: the latest version, paginated by characters."""
        return page(self.get(path), offset, limit)


def _check_content(path: str, content: object, allow_empty: bool = False) -> str:
    text = check_text(f"{path}: content", content)
    if not text.strip() and not allow_empty:
        raise ValidationError(f"{path}: a document needs some content")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise ValidationError(f"{path}: longer than {MAX_DOCUMENT_CHARS:,} characters; "
                              "split it into several documents")
    return text


def _status(before: Document | None, after: Document) -> Status:
    if before is None:
        return "created"
    return "unchanged" if before.version == after.version else "updated"


def _as_document(version: DocumentVersion) -> Document:
    return Document(version.path, version.content, version.tags, version.version,
                    version.created_at, version.updated_at, dict(version.metadata))

