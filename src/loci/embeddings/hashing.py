"""A deterministic feature-hashing embedder: the test double shipped in the package.

:class:`HashEmbedder` needs nothing beyond numpy and gives the same vector for the same
text on every machine and every run (blake2b, never Python's salted ``hash``). Each
lowercase word and each character trigram of each word (padded with ``^`` and ``$``)
adds a signed unit to one bucket, so texts that share words or word pieces get a
higher cosine than unrelated texts. A text without words maps to one fixed unit vector;
one whose units cancel out (possible with few buckets) to a unit of its own.
It is no semantic model: synonyms do not meet.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from loci.embeddings.base import Vectors, check_texts, empty_vectors, l2_normalize

_WORD = re.compile(r"\w+", re.UNICODE)
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5


def _features(text: str) -> list[tuple[str, float]]:
    feats: list[tuple[str, float]] = []
    for word in _WORD.findall(text.lower()):
        feats.append(("w:" + word, _WORD_WEIGHT))
        padded = f"^{word}$"
        feats.extend(("c:" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return feats or [("<empty>", 1.0)]


class HashEmbedder:
    """Feature hashing of word unigrams and character trigrams into ``dim`` buckets."""

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise ValueError("dim must be at least 2")
        self.dim = dim
        self.name = f"hash-{dim}"
        self._cache: dict[str, tuple[int, float]] = {}

    def _bucket(self, feature: str) -> tuple[int, float]:
        hit = self._cache.get(feature)
        if hit is None:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            hit = (value >> 1) % self.dim, (1.0 if value & 1 else -1.0)
            if len(self._cache) > 200_000:
                self._cache.clear()
            self._cache[feature] = hit
        return hit

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit vectors of shape ``(len(texts), dim)``."""
        items = check_texts(texts)
        if not items:
            return empty_vectors(self.dim)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            for feature, weight in _features(text):
                bucket, sign = self._bucket(feature)
                out[row, bucket] += sign * weight
            if not out[row].any():  # signed units cancelled out (few buckets): still a unit
                bucket, sign = self._bucket("t:" + text)
                out[row, bucket] = sign
        return l2_normalize(out)

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"
