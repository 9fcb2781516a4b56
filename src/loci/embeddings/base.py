"""The embedding contract: what every provider promises, and small shared helpers.

An :class:`Embedder` turns texts into float32 vectors of a fixed dimension whose rows
are L2-normalised, so that a dot product is a cosine similarity. ``name`` is a stable
model id that the store records next to the vectors: a store indexed with one model
refuses queries embedded with another.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of shape ``(len(texts), dim)``."""

    @property
    def name(self) -> str:
        """Stable model id recorded in the store, e.g. ``"minilm-l6-v2-int8"``."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts; rows are L2-normalised; empty input gives shape ``(0, dim)``."""
        ...


def embed_one(embedder: Embedder, text: str) -> Vectors:
    """The vector of a single text, shape ``(dim,)``."""
    vector: Vectors = embedder.embed([text])[0]
    return vector


def l2_normalize(vectors: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length as float32; all-zero rows stay zero."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def empty_vectors(dim: int) -> Vectors:
    """The ``(0, dim)`` answer to an empty input."""
    return np.zeros((0, dim), dtype=np.float32)


def batched(items: Sequence[int], size: int) -> Iterator[Sequence[int]]:
    """Consecutive slices of at most ``size`` items."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    for start in range(0, len(items), size):
        yield items[start : start + size]


def check_texts(texts: Sequence[str]) -> list[str]:
    """Texts as a list, rejecting a bare string (a common mistake) and non-strings."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    out = list(texts)
    for text in out:
        if not isinstance(text, str):
            raise TypeError(f"embed() takes strings, got {type(text).__name__}")
    return out
