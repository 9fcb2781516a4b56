"""A faster build of the bundled model, made once and cached.

The bundled ``model.onnx`` stores its int8 weights as Cast + Mul nodes, which
onnxruntime folds back into float32 weights when it loads them: its matrix products
run in float32. Quantized again with per-channel int8 weights (onnxruntime's dynamic
quantization), they run as int8 products: on the LoCoMo benchmark (2 cores) ingest
took 129 s instead of 183 s, and a server search with the local model 35% less CPU,
with retrieval within noise (R@10 0.8148 vs 0.8197, NDCG@10 0.6263 vs 0.6301;
benchmarks/RESULTS.md).

Its vectors keep cosine > 0.99 to the original float32 model's, so they share the
bundled model's name: a store indexed by either searches well with the other (LoCoMo,
documents embedded by one and queries by the other, in RESULTS.md).

Building takes a few seconds and needs the ``onnx`` package, the ``fast`` extra
(``pip install "loci-context[fast]"``); without it the bundled file runs as it is and
the process says so once in its log (a build already cached is still used). The file
is cached as ``<cache>/minilm-<source digest>-<onnxruntime version>-q8.onnx``, written
to a temporary directory and renamed, under a lock so that processes starting together
build it once; the next build removes what a killed one left. If building fails, the
bundled file is used as it is.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX: no lock (processes may build the same file at once)
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("loci.embeddings.quantize")
#: Builds happen in temporary directories named so in the cache (~110 MB each).
_BUILDING = ".building-"


def fast_model(source: Path, cache: Path, ort: Any) -> Path:
    """The cached per-channel int8 build of ``source`` (built if missing), or ``source``
    itself if it cannot be built here."""
    try:
        target = cache / f"minilm-{_digest(source)}-{ort.__version__}-q8.onnx"
        if target.is_file():
            return target
        if importlib.util.find_spec("onnx") is None:
            _say_onnx_is_missing()
            return source
        cache.mkdir(parents=True, exist_ok=True)
        with _locked(target.with_suffix(".lock")):
            if not target.is_file():  # another process may have built it meanwhile
                # A killed build's directory (without a lock, it may be a live one).
                for leftover in cache.glob(f"{_BUILDING}*") if fcntl else ():
                    shutil.rmtree(leftover, ignore_errors=True)
                _build(source, target, ort)
        return target
    except Exception as exc:  # onnx missing, disk full, unreadable model: run as is
        log.warning("using the bundled embedding model as it is (slower): could not "
                    "build its int8 version in %s: %s", cache, exc)
        return source


@functools.cache
def _say_onnx_is_missing() -> None:
    """Once per process: a core install is a supported setup, so an info line, not a
    warning at every start."""
    log.info('using the bundled embedding model as it is: its faster int8 build needs '
             'the fast extra (pip install "loci-context[fast]")')


def _build(source: Path, target: Path, ort: Any) -> None:
    """Fold ``source`` to float32 (onnxruntime's basic graph optimizations), then
    quantize its weights per channel to int8 into ``target``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix=_BUILDING, dir=target.parent) as tmp:
        folded, built = Path(tmp) / "folded.onnx", Path(tmp) / "built.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        options.log_severity_level = 3
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        with _quiet_root_logger():  # it advises "pre-processing" on the root logger
            quantize_dynamic(folded, built, per_channel=True, weight_type=QuantType.QInt8)
        os.replace(built, target)
    log.info("built the int8 embedding model %s", target)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()[:16]


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` across processes (nothing where there is no
    ``fcntl``)."""
    if fcntl is None:
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            with suppress(OSError):
                fcntl.flock(handle, fcntl.LOCK_UN)
