"""The knowledge base: documents at hierarchical paths with tags, versions
and hybrid search; directory import; the agent's ``search_knowledge`` and
``read_document`` tools; and the librarian that files finished sessions into
``/conversations/`` and ``/profile/``."""

from loci.checks import clean_tags
from loci.knowledge.ingest import DirectoryImport, import_directory
from loci.knowledge.librarian import Librarian, SessionKnowledge
from loci.knowledge.paths import check_folder, check_path
from loci.knowledge.service import KnowledgeBase, NewDocument, PutResult
from loci.knowledge.tools import DocumentPage, DocumentSummary

__all__ = [
    "DirectoryImport",
    "DocumentPage",
    "DocumentSummary",
    "KnowledgeBase",
    "Librarian",
    "NewDocument",
    "PutResult",
    "SessionKnowledge",
    "check_folder",
    "check_path",
    "clean_tags",
    "import_directory",
]
