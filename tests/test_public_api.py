import inspect
import typing

import loci
from loci.knowledge import KnowledgeBase


def test_public_api_is_pinned() -> None:
    assert sorted(loci.__all__) == sorted([
        "ApiKey", "Asked", "AsyncLoci", "AuthError", "BudgetExceededError", "Compaction",
        "CompactionResult", "CompiledContext", "ConfigError", "ConflictError", "Consolidation",
        "Criterion", "DirectoryImport", "Document", "DocumentPage", "DocumentSummary",
        "DocumentVersion", "Embedder", "EmbeddingMismatchError", "Event", "Exchange", "Extractor",
        "Focus", "ImportReport", "ImportedCount", "IndexStatus", "Indexer", "Intake",
        "ForbiddenError", "KnowledgeBase", "LayerReport", "LoadedSkill", "Loci", "LociError",
        "Memory", "MemoryFiles", "MemoryPage", "MemorySummary", "MemoryVersion", "NewDocument",
        "Node", "NotFoundError", "Price", "Proposal", "ProposedChange", "ProviderError",
        "PutResult", "Relay", "ReplyResult", "RetentionReport", "Runtime", "SaveResult", "Scope",
        "SearchFilters", "SearchHit", "SessionErasure", "SessionInfo", "SessionUsage",
        "SessionKnowledge", "Settings", "Skill", "SkillSet", "StateItem", "Store", "StoreError",
        "SyncReport", "TagFilter", "TokenCounter", "Turn", "Upstream", "Usage", "UsageLedger",
        "UsageRecord", "UsageReport", "UsageTotals", "UserErasure", "ValidationError", "Workspace",
        "WorkspaceWrite", "__version__", "context_window", "events_to_messages", "load_settings",
        "open_store", "soul_from_answers", "token_counter", "write_workspace",
    ])
    for name in loci.__all__:
        assert hasattr(loci, name), name


def _classes(annotation: object) -> set[type]:
    if typing.get_origin(annotation) is not None:
        return set().union(*(_classes(a) for a in typing.get_args(annotation)))
    if inspect.isclass(annotation) and annotation.__module__.startswith("loci."):
        return {annotation}
    return set()


def test_every_type_the_api_takes_or_returns_is_exported() -> None:
    found: set[type] = set()
    for owner in (loci.Loci, loci.AsyncLoci, loci.Runtime, KnowledgeBase, loci.Turn):
        for name, member in inspect.getmembers(owner):
            function = member.fget if isinstance(member, property) else getattr(
                member, "func", member)
            constructor = name == "__init__" and owner is not KnowledgeBase  # built by Loci
            if (name.startswith("_") and not constructor) or not callable(function):
                continue
            hints = typing.get_type_hints(function, localns=vars(loci))
            for annotation in hints.values():
                found |= _classes(annotation)
    missing = {cls.__name__ for cls in found if getattr(loci, cls.__name__, None) is not cls}
    assert not missing, f"returned or taken but not exported from loci: {sorted(missing)}"


def test_every_error_is_a_loci_error() -> None:
    errors = [getattr(loci, n) for n in loci.__all__ if n.endswith("Error")]
    assert len(errors) == 11
    for error in errors:
        assert issubclass(error, loci.LociError)
    assert not issubclass(loci.LociError, MemoryError)
