import loci


def test_public_api_is_pinned() -> None:
    assert sorted(loci.__all__) == [
        "AuthError", "BudgetExceededError", "Compaction", "CompiledContext", "ConfigError",
        "ConflictError", "Document", "EmbeddingMismatchError", "Event", "ForbiddenError",
        "LayerReport",
        "Loci", "LociError", "Memory", "NotFoundError", "ProviderError", "Scope",
        "SearchFilters", "SearchHit", "SessionInfo", "Settings", "Skill", "StateItem",
        "Store", "StoreError", "TokenCounter", "ValidationError", "__version__",
        "context_window", "load_settings", "open_store", "token_counter",
    ]
    for name in loci.__all__:
        assert hasattr(loci, name), name


def test_every_error_is_a_loci_error() -> None:
    errors = [getattr(loci, n) for n in loci.__all__ if n.endswith("Error")]
    assert len(errors) == 11
    for error in errors:
        assert issubclass(error, loci.LociError)
    assert not issubclass(loci.LociError, MemoryError)
