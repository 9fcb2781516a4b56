"""An approximate (HNSW) index for large scopes, persisted next to the database.

Exact search reads every vector per query: at 100k x 384 float32 that is 150 MB of
memory traffic, ~5-25 ms on two cores. Above ``ANN_THRESHOLD`` vectors a usearch HNSW
graph (half-precision, cosine) answers in about a millisecond. Building it costs time
once (a minute or more at 100k on two busy cores), so it is built in a background
thread while exact search keeps answering (``GraphBuild``), saved to
``<dir>/<name>.usearch`` with the highest ``vec_seq`` it holds, and the next process
loads it and only adds what was written since. Rows deleted from the database may
linger in the graph; hits are always re-read from the database, which drops them.

Several processes may serve one database (``loci serve --workers``): building and
saving hold an exclusive lock on ``<name>.lock``, so the graph is built once (the
others wait, then load it) and a graph is never paired with another's ``max_seq``.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

try:
    import fcntl
except ImportError:  # not POSIX: one process per database
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("loci.store.ann")
Matrix = npt.NDArray[np.float32]
#: Vectors from which unfiltered searches use the graph: below it an exact search reads
#: little enough; above it the graph answers faster with recall close to exact, and is
#: built in the background (``benchmarks/ann_recall.py``, ``retrieval_latency.py``).
ANN_THRESHOLD = 5_000
#: Search breadth, chosen on the bundled model's vectors of real sentences
#: (``benchmarks/ann_recall.py``): a little recall for much less time per search; the
#: hash test embedder's vectors have no structure, so they cannot judge it.
EXPANSION_SEARCH = 64
#: Build breadth: half of 128 builds about twice as fast for a point of recall@10.
EXPANSION_ADD = 64
#: Rows added per call while building, so progress is visible and memory bounded.
BUILD_CHUNK = 10_000
#: Rows added per call while extending a copy of a graph (how soon an extension stops).
EXTEND_CHUNK = 1_000


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
        #: Held while the graph changes or answers (the library's searches share one
        #: scratch space); a search that finds it busy answers exactly instead of waiting.
        self.lock = threading.Lock()
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

    def copy(self) -> AnnIndex:
        """An independent copy (reading the graph, as searches of it do meanwhile)."""
        twin = AnnIndex(self.dim, self.path)
        twin._index = self._index.copy()
        twin.max_seq, twin.dirty = self.max_seq, self.dirty
        return twin

    def upsert(self, keys: Sequence[int], vectors: Matrix, seq: int, threads: int = 2
               ) -> None:
        if not len(keys):
            return
        key_array = np.asarray(keys, dtype=np.uint64)
        present = [k for k in keys if self._index.contains(k)]
        if present:
            self._index.remove(present)
        self._index.add(key_array, vectors, threads=threads)
        self.max_seq = max(self.max_seq, seq)
        self.dirty += len(keys)

    def search(self, query: Matrix, k: int) -> list[tuple[int, float]]:
        if len(self) == 0:
            return []
        # One query needs no thread pool (usearch's default, threads=0, dispatches to one).
        found = self._index.search(query, min(k, len(self)), threads=1)
        return [(int(key), 1.0 - float(dist)) for key, dist in zip(
            found.keys, found.distances, strict=True)]

    def save(self) -> None:
        """Write the graph and its ``max_seq`` (call under ``graph_lock``)."""
        if self.path is None or not self.dirty:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
        self._index.save(str(tmp))
        tmp.chmod(0o600)
        tmp.replace(self.path)
        meta = self.path.with_suffix(".json")
        tmp.write_text(json.dumps({"dim": self.dim, "max_seq": self.max_seq}))
        tmp.chmod(0o600)
        tmp.replace(meta)
        self.dirty = 0


@contextmanager
def graph_lock(path: Path | None) -> Iterator[None]:
    """Exclusive, across processes, for building or saving the graph at ``path``."""
    if path is None or fcntl is None:
        yield
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: Builds still running. At exit they stop after their current chunk and are waited for:
#: the graph library's own threads must not outlive the interpreter (the process would
#: abort instead of exiting).
_RUNNING: set[GraphBuild | GraphExtension] = set()
_EXITING = threading.Event()


@atexit.register
def _stop_builds(timeout: float = 30.0) -> None:
    _EXITING.set()
    for build in list(_RUNNING):
        build.wait(timeout)


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
        self.added = 0  # rows this build added (0 if it loaded a complete saved graph)
        self._done = threading.Event()
        _RUNNING.add(self)
        self._thread = threading.Thread(
            target=self._run, args=(dim, path, ids, seqs, vectors),
            name="loci-ann-build", daemon=True)
        self._thread.start()

    def _run(self, dim: int, path: Path | None, ids: npt.NDArray[np.int64],
             seqs: npt.NDArray[np.int64], vectors: Matrix) -> None:
        try:
            with graph_lock(path):  # another process building it: wait, then load it
                ann = AnnIndex.open(dim, path)
                newer = np.nonzero(seqs > ann.max_seq)[0]
                for start in range(0, len(newer), BUILD_CHUNK):
                    if _EXITING.is_set():
                        return  # unfinished: the next process builds it
                    at = newer[start : start + BUILD_CHUNK]
                    ann.upsert(ids[at].tolist(), vectors[at], int(seqs[at].max()))
                    self.added += len(at)
                ann.save()
            self.result = ann
        except BaseException as exc:  # reported to the owner, who stays on exact search
            log.warning("HNSW graph build failed, exact search continues: %s", exc)
            self.error = exc
        finally:
            _RUNNING.discard(self)
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


class GraphExtension:
    """Adds rows written since a graph was made to a copy of it, in a background thread,
    in ``vec_seq`` order (so ``max_seq`` says how far it got). Searches go on using the
    graph meanwhile: the graph library's Python binding does not promise that a search
    may overlap an add, so the rows go into the copy, which becomes ``result`` once it
    holds them all (an extension stopped early leaves ``result`` None). The rows are a
    snapshot: rows written later wait for the next extension."""

    def __init__(self, ann: AnnIndex, ids: npt.NDArray[np.int64],
                 seqs: npt.NDArray[np.int64], vectors: Matrix) -> None:
        self.result: AnnIndex | None = None
        self._done = threading.Event()
        self._stopping = threading.Event()
        _RUNNING.add(self)
        self._thread = threading.Thread(target=self._run, args=(ann, ids, seqs, vectors),
                                        name="loci-ann-extend", daemon=True)
        self._thread.start()

    def _run(self, ann: AnnIndex, ids: npt.NDArray[np.int64], seqs: npt.NDArray[np.int64],
             vectors: Matrix) -> None:
        try:
            grown = ann.copy()
            order = np.argsort(seqs, kind="stable")
            for start in range(0, len(order), EXTEND_CHUNK):
                if _EXITING.is_set() or self._stopping.is_set():
                    return
                at = order[start : start + EXTEND_CHUNK]
                # One thread: the cores are wanted by the searches and writes meanwhile.
                grown.upsert(ids[at].tolist(), vectors[at], int(seqs[at].max()), threads=1)
            self.result = grown
        except BaseException as exc:  # the graph stays as it was; exact covers the rest
            log.warning("extending the HNSW graph failed: %s", exc)
        finally:
            _RUNNING.discard(self)
            self._done.set()

    def stop(self) -> None:
        """Stop after the chunk under way, and wait for it."""
        self._stopping.set()
        self._done.wait()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)
