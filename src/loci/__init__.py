"""Loci: context and memory for LLM agents.

The public API is exactly what ``__all__`` lists; everything else is private.
"""

from loci.context.compiled import CompiledContext, LayerReport
from loci.engine import Loci
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
from loci.models import (
    Compaction,
    Document,
    Event,
    Memory,
    Scope,
    SearchHit,
    SessionInfo,
    Skill,
    StateItem,
)
from loci.runtime import Runtime
from loci.settings import Settings, load_settings
from loci.store import SearchFilters, Store, open_store
from loci.tokens import TokenCounter, context_window, token_counter

__version__ = "0.1.0"

__all__ = [
    "AuthError",
    "BudgetExceededError",
    "Compaction",
    "CompiledContext",
    "ConfigError",
    "ConflictError",
    "Document",
    "EmbeddingMismatchError",
    "Event",
    "ForbiddenError",
    "LayerReport",
    "Loci",
    "LociError",
    "Memory",
    "NotFoundError",
    "ProviderError",
    "Runtime",
    "Scope",
    "SearchFilters",
    "SearchHit",
    "SessionInfo",
    "Settings",
    "Skill",
    "StateItem",
    "Store",
    "StoreError",
    "TokenCounter",
    "ValidationError",
    "__version__",
    "context_window",
    "load_settings",
    "open_store",
    "token_counter",
]
