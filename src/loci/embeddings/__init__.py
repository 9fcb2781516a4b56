"""Embedding providers: the bundled local model, any OpenAI-compatible API, a test hash.

``make_embedder(provider, **options)`` is the one seam the rest of Loci uses::

    make_embedder("local")                   # all-MiniLM-L6-v2 int8, offline (default)
    make_embedder("hash", dim=384)           # deterministic test double, numpy only
    make_embedder("openai", model="text-embedding-3-small", api_key="sk-...")
    make_embedder("openai", model="nomic-embed-text", base_url="http://localhost:11434/v1")

Every provider returns float32 rows of unit length, so a dot product is a cosine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loci.embeddings.base import Embedder, Vectors, embed_one, l2_normalize
from loci.embeddings.hashing import HashEmbedder
from loci.embeddings.local import INSTALL_HINT, LocalEmbedder
from loci.embeddings.openai_compat import OpenAICompatibleEmbedder
from loci.errors import ConfigError
from loci.providers import provider_options

__all__ = [
    "DEFAULT_PROVIDER",
    "INSTALL_HINT",
    "PROVIDERS",
    "Embedder",
    "HashEmbedder",
    "LocalEmbedder",
    "OpenAICompatibleEmbedder",
    "Vectors",
    "embed_one",
    "l2_normalize",
    "make_embedder",
]

DEFAULT_PROVIDER = "local"

#: Provider names (and aliases) accepted by :func:`make_embedder`.
PROVIDERS: dict[str, Callable[..., Embedder]] = {
    "local": LocalEmbedder,
    "hash": HashEmbedder,
    "openai": OpenAICompatibleEmbedder,
    "openai-compatible": OpenAICompatibleEmbedder,
}


#: Providers that compute in this process (no network).
IN_PROCESS = frozenset({"local", "hash"})


def make_embedder(provider: str = DEFAULT_PROVIDER, **options: Any) -> Embedder:
    """Build the embedder called ``provider`` with its keyword options.

    Options whose value is ``None`` or ``""`` are dropped, so unset settings fall back
    to each provider's defaults. Unknown providers or options raise ``ConfigError``.
    """
    key, factory, given = provider_options("embedding", PROVIDERS, provider,
                                           DEFAULT_PROVIDER, options)
    if key.startswith("openai") and "model" not in given:
        raise ConfigError(
            f"embedding provider {key!r} needs a model "
            "(embedding.model, e.g. 'text-embedding-3-small' or 'nomic-embed-text')"
        )
    return factory(**given)
