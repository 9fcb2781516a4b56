"""Query vectors: remembered per text, read-only, failures not remembered."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from loci.embeddings.base import Vectors
from loci.embeddings.hashing import HashEmbedder
from loci.embeddings.queries import QueryVectors
from loci.errors import ProviderError


class Counting(HashEmbedder):
    """The real hash embedder, counting its calls (and failing on request)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.fail = False

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(texts[0])
        if self.fail:
            raise ProviderError("down")
        return super().embed(texts)


def test_vectors_are_remembered_per_text_and_read_only() -> None:
    embedder = Counting()
    queries = QueryVectors(embedder, size=2)
    first = queries.get("where do I live?")
    assert np.array_equal(first, HashEmbedder().embed(["where do I live?"])[0])
    assert queries.get("where do I live?") is first
    assert not first.flags.writeable
    queries.get("b")
    queries.get("c")  # evicts the oldest text
    queries.get("where do I live?")
    assert embedder.calls == ["where do I live?", "b", "c", "where do I live?"]


def test_a_failure_is_raised_and_not_remembered() -> None:
    embedder = Counting()
    queries = QueryVectors(embedder)
    embedder.fail = True
    with pytest.raises(ProviderError):
        queries.get("q")
    embedder.fail = False
    assert queries.get("q").shape == (384,)
    assert embedder.calls == ["q", "q"]
