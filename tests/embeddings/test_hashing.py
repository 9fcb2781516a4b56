"""HashEmbedder: deterministic, shaped, unit-length, and word overlap means similarity."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loci.embeddings import Embedder, HashEmbedder, embed_one


def test_shape_dtype_and_name() -> None:
    emb = HashEmbedder(dim=64)
    vectors = emb.embed(["one text", "another text", ""])
    assert vectors.shape == (3, 64)
    assert vectors.dtype == np.float32
    assert emb.name == "hash-64"
    assert emb.dim == 64
    assert isinstance(emb, Embedder)


def test_empty_input_has_zero_rows() -> None:
    assert HashEmbedder().embed([]).shape == (0, 384)


def test_rows_are_unit_length_even_without_words() -> None:
    vectors = HashEmbedder().embed(["hello world", "", "!!! ???", "Ünïcödé 東京"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=8))
def test_any_text_gives_unit_rows(texts: list[str]) -> None:
    vectors = HashEmbedder(dim=32).embed(texts)
    assert vectors.shape == (len(texts), 32)
    assert np.all(np.isfinite(vectors))
    if texts:
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_deterministic_within_and_across_processes() -> None:
    text = "Caroline went to the support group on Tuesday"
    first = HashEmbedder().embed([text])
    assert np.array_equal(first, HashEmbedder().embed([text]))
    # Python's hash() is salted per process; the embedder must not depend on it.
    code = (
        "import sys; from loci.embeddings import HashEmbedder; "
        f"sys.stdout.write(HashEmbedder().embed([{text!r}]).tobytes().hex())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout
    assert bytes.fromhex(out) == first.tobytes()


def test_batch_equals_one_by_one() -> None:
    emb = HashEmbedder()
    texts = ["alpha beta", "gamma", "delta epsilon zeta"]
    batch = emb.embed(texts)
    for row, text in zip(batch, texts, strict=True):
        assert np.array_equal(row, embed_one(emb, text))


def test_shared_words_score_higher_than_unrelated() -> None:
    emb = HashEmbedder()
    query, related, unrelated = emb.embed(
        [
            "the cat sat on the mat",
            "a cat sat on my mat yesterday",
            "stock markets fell sharply today",
        ]
    )
    assert float(query @ related) > float(query @ unrelated) + 0.2


def test_case_insensitive_and_trigrams_link_word_forms() -> None:
    emb = HashEmbedder()
    a, b, c = emb.embed(["Painting", "painted", "quarterly"])
    assert np.array_equal(emb.embed(["PAINTING"])[0], a)
    assert float(a @ b) > float(a @ c)


def test_rejects_a_bare_string_and_bad_dim() -> None:
    with pytest.raises(TypeError):
        HashEmbedder().embed("not a list")
    with pytest.raises(ValueError):
        HashEmbedder(dim=1)
