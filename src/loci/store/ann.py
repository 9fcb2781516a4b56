"""An approximate (HNSW) index for large scopes, persisted next to the database.

Exact search reads every vector per query: at 100k x 384 float32 that is 150 MB of
memory traffic, ~5-25 ms on two cores. Above ``ANN_THRESHOLD`` vectors a usearch HNSW
graph (half-precision, cosine) answers in about a millisecond. Building it costs time
once (a minute or more at 100k on two busy cores), so it is built in a background
thread while exact search keeps answering (``GraphBuild``).

A scope's vectors may live in several graphs: the **base**, built first, and
**segments**, each built from rows written after the graph before it (``SegmentBuild``:
a bulk import), searched side by side. A segment is a new graph, never a copy of one:
copying a graph holds the interpreter's lock for its whole duration (~130 ms at 100k
rows), stalling every thread of the process. Segments of one size class are merged into
one, again by building a new graph (``benchmarks/RESULTS.md``).

The graphs are saved to ``<dir>/<name>.usearch`` (the base), ``<name>.seg-<token>.usearch``
(the segments) and ``<name>.json``, which pairs each file with the highest ``vec_seq`` it
holds; the next process loads them and only adds what was written since. Rows deleted
from the database may linger in a graph; hits are always re-read from the database,
which drops them.

Several processes may serve one database (``loci serve --workers``): building and
saving hold an exclusive lock on ``<name>.lock``, so the graphs are built once (the
others wait, then load them) and a graph is never paired with another's ``max_seq``.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
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
#: Rows added per call while building a segment (how soon a stopped one stops).
SEGMENT_CHUNK = 1_000


def _import_usearch() -> Any:
    """``usearch.index.Index``, imported after onnxruntime if that is installed: with
    usearch 2.26 (numkong's kernels) loaded first, importing onnxruntime (the bundled
    embedding model) later in the process segfaults inside libstdc++. The pinned
    usearch does not, but a newer one may be installed beside Loci."""
    if importlib.util.find_spec("onnxruntime") is not None:
        importlib.import_module("onnxruntime")
    return importlib.import_module("usearch.index").Index


class AnnIndex:
    """One HNSW graph and the highest ``vec_seq`` among its rows."""

    def __init__(self, dim: int) -> None:
        Index = _import_usearch()

        self.dim = dim
        self.max_seq = 0
        #: Rows added since it was last written; its file name once written (segments).
        self.dirty = 0
        self.file: str | None = None
        #: Held while the graph changes or answers (the library's searches share one
        #: scratch space); a search that finds it busy answers exactly instead of waiting.
        self.lock = threading.Lock()
        self._index = Index(ndim=dim, metric="cos", dtype="f16", connectivity=16,
                            expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)

    def __len__(self) -> int:
        return int(self._index.size)

    @property
    def nbytes(self) -> int:
        """Bytes the graph holds (its vectors at half precision and its links)."""
        return int(self._index.memory_usage)

    def upsert(self, keys: Sequence[int], vectors: Matrix, seq: int) -> None:
        if not len(keys):
            return
        key_array = np.asarray(keys, dtype=np.uint64)
        present = [k for k in keys if self._index.contains(k)]
        if present:
            self._index.remove(present)
        # One thread: with two, the library's workers were once seen spinning on each
        # other (both at 100% CPU, the build never ending) in the proxy's fuzz test;
        # builds run in the background, where a second core is worth no such risk.
        self._index.add(key_array, vectors, threads=1)
        self.max_seq = max(self.max_seq, seq)
        self.dirty += len(keys)

    def search(self, query: Matrix, k: int) -> list[tuple[int, float]]:
        if len(self) == 0:
            return []
        # One query needs no thread pool (usearch's default, threads=0, dispatches to one).
        found = self._index.search(query, min(k, len(self)), threads=1)
        return [(int(key), 1.0 - float(dist)) for key, dist in zip(
            found.keys, found.distances, strict=True)]

    def _load(self, path: Path, max_seq: int) -> None:
        self._index.load(str(path))
        self.max_seq, self.file = max_seq, path.name

    def _write(self, path: Path) -> None:
        _replace(path, lambda tmp: self._index.save(str(tmp)))
        self.file, self.dirty = path.name, 0


def _replace(path: Path, write: Callable[[Path], object]) -> None:
    """Write ``path`` whole or not at all: ``write`` fills a private file that replaces it."""
    tmp = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
    write(tmp)
    tmp.chmod(0o600)
    tmp.replace(path)


def load_graphs(dim: int, path: Path | None) -> list[AnnIndex]:
    """The graphs saved at ``path`` (the base, then its segments, oldest first) if
    compatible ones exist, else one empty graph (call under ``graph_lock``)."""
    meta = path.with_suffix(".json") if path else None
    if path is None or meta is None or not path.exists() or not meta.exists():
        return [AnnIndex(dim)]
    try:
        info = json.loads(meta.read_text())
        if info.get("dim") != dim:
            return [AnnIndex(dim)]
        files = [(path, int(info["max_seq"]))] + [
            (path.with_name(str(s["file"])), int(s["max_seq"]))
            for s in info.get("segments", [])]
        graphs = []
        for file, max_seq in files:
            graph = AnnIndex(dim)
            graph._load(file, max_seq)
            graphs.append(graph)
        return graphs
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return [AnnIndex(dim)]  # unreadable: rebuild from the database


def save_graphs(path: Path | None, graphs: Sequence[AnnIndex]) -> None:
    """Write the graphs changed since they were written (the base at ``path``, each
    segment to a file of its own) and the file that pairs them with their ``max_seq``;
    segment files no longer named are removed (call under ``graph_lock``)."""
    if path is None or not graphs:
        return
    segments = graphs[1:]
    named = [s.file for s in segments]
    meta = path.with_suffix(".json")
    if not any(g.dirty for g in graphs) and None not in named and meta.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if graphs[0].dirty or not path.exists():
        graphs[0]._write(path)
    for segment in segments:
        if segment.dirty or segment.file is None:
            segment._write(path.with_name(f"{path.stem}.seg-{secrets.token_hex(6)}.usearch"))
    pairs = json.dumps({"dim": graphs[0].dim, "max_seq": graphs[0].max_seq,
                        "segments": [{"file": s.file, "max_seq": s.max_seq} for s in segments]})
    _replace(meta, lambda tmp: tmp.write_text(pairs))
    _remove_segments(path, keep={s.file for s in segments})


def remove_graphs(path: Path) -> None:
    """Remove every file of the graphs saved at ``path`` (call under ``graph_lock``)."""
    path.unlink(missing_ok=True)
    path.with_suffix(".json").unlink(missing_ok=True)
    _remove_segments(path, keep=set())


def _remove_segments(path: Path, keep: set[str | None]) -> None:
    for file in path.parent.glob(f"{path.stem}.seg-*.usearch"):
        if file.name not in keep:
            file.unlink(missing_ok=True)


@contextmanager
def graph_lock(path: Path | None) -> Iterator[None]:
    """Exclusive, across processes, for building or saving the graphs at ``path``."""
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
_RUNNING: set[GraphBuild | SegmentBuild] = set()
_EXITING = threading.Event()


@atexit.register
def _stop_builds(timeout: float = 30.0) -> None:
    _EXITING.set()
    for build in list(_RUNNING):
        build.wait(timeout)


class GraphBuild:
    """Loads (or builds) a scope's graphs in a background thread from a snapshot of rows.

    The snapshot is copied, so the owner may keep changing its own arrays; rows written
    after it are added by the owner once the graphs are ready (``AnnIndex.max_seq`` says
    how far each got).
    """

    def __init__(self, dim: int, path: Path | None, ids: npt.NDArray[np.int64],
                 seqs: npt.NDArray[np.int64], vectors: Matrix) -> None:
        self.result: list[AnnIndex] | None = None
        self.error: BaseException | None = None
        self.added = 0  # rows this build added (0 if it loaded complete saved graphs)
        self._done = threading.Event()
        _RUNNING.add(self)
        self._thread = threading.Thread(
            target=self._run, args=(dim, path, ids, seqs, vectors),
            name="loci-ann-build", daemon=True)
        self._thread.start()

    def _run(self, dim: int, path: Path | None, ids: npt.NDArray[np.int64],
             seqs: npt.NDArray[np.int64], vectors: Matrix) -> None:
        try:
            with graph_lock(path):  # another process building them: wait, then load them
                graphs = load_graphs(dim, path)
                newest = graphs[-1]
                newer = np.nonzero(seqs > newest.max_seq)[0]
                for start in range(0, len(newer), BUILD_CHUNK):
                    if _EXITING.is_set():
                        return  # unfinished: the next process builds it
                    at = newer[start : start + BUILD_CHUNK]
                    newest.upsert(ids[at].tolist(), vectors[at], int(seqs[at].max()))
                    self.added += len(at)
                save_graphs(path, graphs)
            self.result = graphs
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


class SegmentBuild:
    """A new graph of the given rows, built in a background thread in ``vec_seq`` order;
    ``result`` once it holds them all (a build stopped early leaves it None). Searches
    meanwhile use the graphs there are: none of them is touched. The rows' vectors are
    read by ``vectors`` in that thread (copying them was the larger part of starting a
    segment on the searching thread)."""

    def __init__(self, dim: int, ids: npt.NDArray[np.int64], seqs: npt.NDArray[np.int64],
                 vectors: Callable[[], Matrix]) -> None:
        self.result: AnnIndex | None = None
        self._done = threading.Event()
        self._stopping = threading.Event()
        _RUNNING.add(self)
        self._thread = threading.Thread(target=self._run, args=(dim, ids, seqs, vectors),
                                        name="loci-ann-segment", daemon=True)
        self._thread.start()

    def _run(self, dim: int, ids: npt.NDArray[np.int64], seqs: npt.NDArray[np.int64],
             vectors: Callable[[], Matrix]) -> None:
        try:
            segment, rows = AnnIndex(dim), vectors()
            order = np.argsort(seqs, kind="stable")
            for start in range(0, len(order), SEGMENT_CHUNK):
                if _EXITING.is_set() or self._stopping.is_set():
                    return
                at = order[start : start + SEGMENT_CHUNK]
                segment.upsert(ids[at].tolist(), rows[at], int(seqs[at].max()))
            self.result = segment
        except BaseException as exc:  # the graphs stay as they were; exact covers the rest
            log.warning("building an HNSW segment failed: %s", exc)
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
