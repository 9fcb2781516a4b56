"""An approximate (HNSW) index for large scopes, persisted next to the database.

Exact search reads every vector per query: at 100k x 384 float32 that is 150 MB of
memory traffic, ~5-25 ms on two cores. Above ``ANN_THRESHOLD`` vectors a usearch HNSW
graph (half-precision, cosine) answers in about a millisecond. Building it costs time
once (a minute or more at 100k on two busy cores), so it is built in a background
thread while exact search keeps answering (``GraphBuild``), saved to
``<dir>/<name>.usearch`` with the highest ``vec_seq`` it holds, and the next process
loads it and only adds what was written since. Rows deleted from the database may
linger in the graph; hits are always re-read from the database, which drops them.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

log = logging.getLogger("loci.store.ann")
Matrix = npt.NDArray[np.float32]
ANN_THRESHOLD = 20_000
#: Search breadth: recall@10 of ~0.83-0.9 at 20k-100k on the hash test embedder (whose
#: vectors have little structure; real embeddings cluster and do better).
EXPANSION_SEARCH = 96
#: Build breadth: 64 builds twice as fast as 128 for about 1 point of recall@10
#: (0.828 vs 0.839 at 20k hash vectors, measured in the same run).
EXPANSION_ADD = 64
#: Rows added per call while building, so progress is visible and memory bounded.
BUILD_CHUNK = 10_000


def _import_usearch() -> Any:
    """``usearch.index.Index``, imported after onnxruntime if that is installed: with
    usearch 2.26 loaded first, importing onnxruntime (the bundled embedding model)
    later in the process segfaults inside libstdc++; the other order works."""
    if importlib.util.find_spec("onnxruntime") is not None:
        importlib.import_module("onnxruntime")
    return importlib.import_module("usearch.index").Index


class AnnIndex:
    def __init__(self, dim: int, path: Path | None) -> None:
        Index = _import_usearch()

        self.dim = dim
        self.path = path
        self.max_seq = 0
        self.dirty = 0
        self._index = Index(ndim=dim, metric="cos", dtype="f16", connectivity=16,
                            expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)

    @classmethod
    def open(cls, dim: int, path: Path | None) -> AnnIndex:
        """A saved graph for ``path`` if a compatible one exists, else an empty one."""
        ann = cls(dim, path)
        meta = path.with_suffix(".json") if path else None
        if path is not None and meta is not None and path.exists() and meta.exists():
            try:
                info = json.loads(meta.read_text())
                if info.get("dim") == dim:
                    ann._index.load(str(path))
                    ann.max_seq = int(info["max_seq"])
            except (OSError, ValueError, KeyError, RuntimeError):
                ann = cls(dim, path)  # unreadable: rebuild from the database
        return ann

    def __len__(self) -> int:
        return int(self._index.size)

    def upsert(self, keys: Sequence[int], vectors: Matrix, seq: int) -> None:
        if not len(keys):
            return
        key_array = np.asarray(keys, dtype=np.uint64)
        present = [k for k in keys if self._index.contains(k)]
        if present:
            self._index.remove(present)
        self._index.add(key_array, vectors, threads=2)
        self.max_seq = max(self.max_seq, seq)
        self.dirty += len(keys)

    def search(self, query: Matrix, k: int) -> list[tuple[int, float]]:
        if len(self) == 0:
            return []
        found = self._index.search(query, min(k, len(self)))
        return [(int(key), 1.0 - float(dist)) for key, dist in zip(
            found.keys, found.distances, strict=True)]

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A name of this process and thread's own: two servers on one database may
        # save the same graph at once, and must not write into one temporary file.
        tmp = self.path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
        self._index.save(str(tmp))
        tmp.replace(self.path)
        self.path.with_suffix(".json").write_text(
            json.dumps({"dim": self.dim, "max_seq": self.max_seq}))
        self.dirty = 0


class GraphBuild:
    """Loads (or builds) a graph in a background thread from a snapshot of rows.

    The snapshot is copied, so the owner may keep changing its own arrays; rows written
    after it are added by the owner once the graph is ready (``AnnIndex.max_seq`` says
    how far the graph got).
    """

    def __init__(self, dim: int, path: Path | None, ids: npt.NDArray[np.int64],
                 seqs: npt.NDArray[np.int64], vectors: Matrix) -> None:
        self.result: AnnIndex | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(dim, path, ids, seqs, vectors),
            name="loci-ann-build", daemon=True)
        self._thread.start()

    def _run(self, dim: int, path: Path | None, ids: npt.NDArray[np.int64],
             seqs: npt.NDArray[np.int64], vectors: Matrix) -> None:
        try:
            ann = AnnIndex.open(dim, path)
            newer = np.nonzero(seqs > ann.max_seq)[0]
            for start in range(0, len(newer), BUILD_CHUNK):
                at = newer[start : start + BUILD_CHUNK]
                ann.upsert(ids[at].tolist(), vectors[at], int(seqs[at].max()))
            ann.save()
            self.result = ann
        except BaseException as exc:  # reported to the owner, who stays on exact search
            log.warning("HNSW graph build failed, exact search continues: %s", exc)
            self.error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)
