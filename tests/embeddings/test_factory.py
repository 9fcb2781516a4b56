"""make_embedder: provider names, aliases, option checking."""

from __future__ import annotations

import pytest

from loci.embeddings import PROVIDERS, HashEmbedder, OpenAICompatibleEmbedder, make_embedder
from loci.errors import ConfigError


def test_hash_provider_with_options() -> None:
    emb = make_embedder("hash", dim=32)
    assert isinstance(emb, HashEmbedder)
    assert emb.dim == 32


def test_names_are_case_and_space_insensitive() -> None:
    assert isinstance(make_embedder(" HASH "), HashEmbedder)


def test_unset_options_fall_back_to_defaults() -> None:
    emb = make_embedder("openai", model="text-embedding-3-small", base_url="", api_key=None)
    assert isinstance(emb, OpenAICompatibleEmbedder)
    assert emb.base_url == "https://api.openai.com/v1"  # no request is made
    emb.close()


def test_unknown_provider_lists_known_ones() -> None:
    with pytest.raises(ConfigError, match="known providers: hash, local, openai"):
        make_embedder("word2vec")
    assert set(PROVIDERS) == {"local", "hash", "openai", "openai-compatible"}


def test_unknown_option_lists_accepted_ones() -> None:
    with pytest.raises(ConfigError, match=r"does not take option.*colour.*it takes: dim"):
        make_embedder("hash", colour="blue")


def test_openai_needs_a_model() -> None:
    with pytest.raises(ConfigError, match="needs a model"):
        make_embedder("openai", base_url="http://127.0.0.1:1/v1")
