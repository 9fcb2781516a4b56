"""Query vectors: remembered per text, prefetched in a thread, failures not cached."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from loci.embeddings.base import Vectors
from loci.embeddings.hashing import HashEmbedder
from loci.embeddings.queries import QueryVectors
from loci.errors import ProviderError


class Counting(HashEmbedder):
    """The real hash embedder, counting calls and the threads they run on."""

    def __init__(self, overlaps: bool) -> None:
        super().__init__()
        self.overlaps = overlaps
        self.calls: list[tuple[str, str]] = []
        self.fail = False

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append((texts[0], threading.current_thread().name))
        if self.fail:
            raise ProviderError("down")
        return super().embed(texts)


def test_vectors_are_remembered_per_text_and_read_only() -> None:
    embedder = Counting(overlaps=False)
    queries = QueryVectors(embedder, size=2)
    first = queries.get("where do I live?")
    assert np.array_equal(first, HashEmbedder().embed(["where do I live?"])[0])
    assert queries.get("where do I live?") is first
    assert not first.flags.writeable
    queries.get("b")
    queries.get("c")  # evicts the oldest text
    queries.get("where do I live?")
    assert [text for text, _ in embedder.calls] == [
        "where do I live?", "b", "c", "where do I live?"]


def test_prefetch_embeds_in_a_worker_thread_only_when_the_embedder_overlaps() -> None:
    overlapping = Counting(overlaps=True)
    queries = QueryVectors(overlapping)
    queries.prefetch("pets?")
    vector = queries.get("pets?")
    assert np.array_equal(vector, HashEmbedder().embed(["pets?"])[0])
    assert len(overlapping.calls) == 1
    assert overlapping.calls[0][1].startswith("loci-embed")
    inline = Counting(overlaps=False)
    QueryVectors(inline).prefetch("pets?")
    assert inline.calls == []


def test_a_failure_is_raised_and_not_remembered() -> None:
    embedder = Counting(overlaps=True)
    queries = QueryVectors(embedder)
    embedder.fail = True
    queries.prefetch("q")
    with pytest.raises(ProviderError):
        queries.get("q")
    embedder.fail = False
    assert queries.get("q").shape == (384,)
    assert len(embedder.calls) == 2
