"""Loci: context and memory for LLM agents.

The public API is exactly what ``__all__`` lists; everything else is private.
"""

from loci.aio import AsyncLoci
from loci.compaction.compactor import CompactionResult
from loci.context.compiled import CompiledContext, LayerReport
from loci.context.focus import Criterion, Focus
from loci.context.render import events_to_messages
from loci.context.skills import LoadedSkill, SkillSet
from loci.context.templates import WorkspaceWrite, soul_from_answers, write_workspace
from loci.context.workspace import Workspace
from loci.embeddings.base import Embedder
from loci.erasure import RetentionReport, SessionErasure, UserErasure
from loci.errors import (
    AuthError,
    BudgetExceededError,
    ConfigError,
    ConflictError,
    EmbeddingMismatchError,
    ForbiddenError,
    LociError,
    NotFoundError,
    ProviderError,
    StoreError,
    ValidationError,
)
from loci.exchange import Asked, Exchange, Relay
from loci.importers import ImportedCount, ImportReport
from loci.indexing import Indexer, IndexStatus
from loci.knowledge import (
    DirectoryImport,
    DocumentPage,
    DocumentSummary,
    KnowledgeBase,
    SessionKnowledge,
)
from loci.knowledge.memory_files import MemoryFiles
from loci.knowledge.service import NewDocument, PutResult
from loci.knowledge.tree import Node
from loci.memory.consolidate import Consolidation, Proposal, ProposedChange
from loci.memory.extract import Extractor
from loci.memory.service import ReplyResult, SaveResult
from loci.memory.stream import TagFilter
from loci.memory.sync import SyncReport
from loci.memory.tools import MemoryPage, MemorySummary
from loci.models import (
    ApiKey,
    Compaction,
    Document,
    DocumentVersion,
    Event,
    Memory,
    MemoryVersion,
    Scope,
    SearchHit,
    SessionInfo,
    Skill,
    StateItem,
    Usage,
    UsageRecord,
)
from loci.pricing import Price
from loci.runtime import Loci, Runtime
from loci.settings import Settings, load_settings
from loci.store import SearchFilters, Store, open_store
from loci.tokens import TokenCounter, context_window, token_counter
from loci.turns import Intake, Turn
from loci.upstreams import Upstream
from loci.usage import SessionUsage, UsageLedger, UsageReport, UsageTotals

__version__ = "0.1.0"

__all__ = [
    "ApiKey",
    "Asked",
    "AsyncLoci",
    "AuthError",
    "BudgetExceededError",
    "Compaction",
    "CompactionResult",
    "CompiledContext",
    "ConfigError",
    "ConflictError",
    "Consolidation",
    "Criterion",
    "DirectoryImport",
    "Document",
    "DocumentPage",
    "DocumentSummary",
    "DocumentVersion",
    "Embedder",
    "EmbeddingMismatchError",
    "Event",
    "Exchange",
    "Extractor",
    "Focus",
    "ForbiddenError",
    "ImportReport",
    "ImportedCount",
    "IndexStatus",
    "Indexer",
    "Intake",
    "KnowledgeBase",
    "LayerReport",
    "LoadedSkill",
    "Loci",
    "LociError",
    "Memory",
    "MemoryFiles",
    "MemoryPage",
    "MemorySummary",
    "MemoryVersion",
    "NewDocument",
    "Node",
    "NotFoundError",
    "Price",
    "Proposal",
    "ProposedChange",
    "ProviderError",
    "PutResult",
    "Relay",
    "ReplyResult",
    "RetentionReport",
    "Runtime",
    "SaveResult",
    "Scope",
    "SearchFilters",
    "SearchHit",
    "SessionErasure",
    "SessionInfo",
    "SessionKnowledge",
    "SessionUsage",
    "Settings",
    "Skill",
    "SkillSet",
    "StateItem",
    "Store",
    "StoreError",
    "SyncReport",
    "TagFilter",
    "TokenCounter",
    "Turn",
    "Upstream",
    "Usage",
    "UsageLedger",
    "UsageRecord",
    "UsageReport",
    "UsageTotals",
    "UserErasure",
    "ValidationError",
    "Workspace",
    "WorkspaceWrite",
    "__version__",
    "context_window",
    "events_to_messages",
    "load_settings",
    "open_store",
    "soul_from_answers",
    "token_counter",
    "write_workspace",
]
