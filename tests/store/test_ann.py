"""The HNSW path of vector search: same answers as exact search, persisted, caught up."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from loci.store import ann
from loci.store.vector_index import VectorIndex


def _rows(vectors: np.ndarray, first_seq: int = 1) -> list[tuple[int, bytes, int]]:
    return [(i + 1, v.astype(np.float32).tobytes(), first_seq + i)
            for i, v in enumerate(vectors)]


def _unit(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_graph_agrees_with_exact_search_and_is_persisted(tmp_path: Path) -> None:
    vectors = _unit(3_000, 32, 1)
    exact = VectorIndex(32, ann_threshold=10**9)
    graph = VectorIndex(32, tmp_path / "g.usearch", ann_threshold=1_000)
    exact.update(_rows(vectors))
    graph.update(_rows(vectors))
    q0 = _unit(1, 32, 5)[0]
    # The graph is built in the background; meanwhile searches are exact.
    assert not graph.graph_ready()
    assert graph.search(q0, 10) == exact.search(q0, 10)
    graph.wait_for_build(60)
    assert graph.graph_ready()
    recalls = []
    for q in _unit(20, 32, 2):
        truth = {i for i, _ in exact.search(q, 10)}
        found = graph.search(q, 10)
        recalls.append(len(truth & {i for i, _ in found}) / 10)
        assert all(-1.0 <= score <= 1.0001 for _, score in found)
    assert sum(recalls) / len(recalls) >= 0.9
    assert (tmp_path / "g.usearch").exists()
    # A new row after the graph exists is found at once (and persisted on request).
    extra = _unit(1, 32, 3)
    graph.update([(99_999, extra[0].tobytes(), 10_000)])
    assert graph.search(extra[0], 1)[0][0] == 99_999
    graph.persist()
    # Another process: loads the saved graph and finds the newest row without a rebuild.
    reopened = VectorIndex(32, tmp_path / "g.usearch", ann_threshold=1_000)
    reopened.update(_rows(vectors))
    reopened.update([(99_999, extra[0].tobytes(), 10_000)])
    reopened.graph_ready()
    reopened.wait_for_build(60)
    assert reopened.graph_ready()
    assert reopened.search(extra[0], 1)[0][0] == 99_999


def _built(path: Path | None, vectors: np.ndarray, threshold: int = 1_000) -> VectorIndex:
    index = VectorIndex(vectors.shape[1], path, ann_threshold=threshold)
    index.update(_rows(vectors))
    index.graph_ready()
    index.wait_for_build(60)
    assert index.graph_ready()
    return index


def test_searches_use_the_graphs_while_a_segment_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loci.store import vector_index

    vectors = _unit(3_000, 32, 11)
    index = _built(tmp_path / "t.usearch", vectors)
    [graph] = index._graphs
    built = graph.max_seq
    # Hold the segment's build before it adds a row, to search while it is under way.
    release = threading.Event()
    run = ann.SegmentBuild._run
    monkeypatch.setattr(ann.SegmentBuild, "_run",
                        lambda self, *a: (release.wait(60), run(self, *a))[1])
    asked: list[int] = []
    ask = graph.search
    monkeypatch.setattr(graph, "search", lambda q, k: asked.append(k) or ask(q, k))
    # A bulk import after the graph: far more rows than a search adds itself.
    tail = _unit(20 * vector_index.INLINE_TAIL, 32, 12)
    index.update([(10_000 + i, v.tobytes(), built + 1 + i) for i, v in enumerate(tail)])
    assert index.search(tail[77], 1)[0][0] == 10_077  # the tail, scored exactly
    assert index._segment is None  # rows came just now: an import may go on
    monkeypatch.setattr(vector_index, "SETTLED", 0.0)
    assert index.search(vectors[3], 1)[0][0] == 4  # the graph's rows
    assert index._segment is not None  # now the tail becomes a segment
    assert len(asked) == 2 and len(graph) == 3_000  # the graph answered, unchanged
    with graph.lock:  # the graph busy: the search answers exactly
        assert index.search(tail[5], 1)[0][0] == 10_005
    assert len(asked) == 2
    # A row that changed since the graph holds it: its old vector no longer matches.
    index.update([(1, tail[9].tobytes(), built + 10 * len(tail))])
    assert dict(index.search(vectors[0], 5)).get(1, 0.0) < 0.9
    release.set()
    index.wait_for_build(60)  # the segment is built from the tail as it was
    index.search(vectors[1], 1)  # and joins the graph; the changed row is added then
    base, segment = index._graphs
    assert base is graph and len(graph) == 3_000 and graph.max_seq == built
    assert len(segment) == len(tail) + 1 and segment.max_seq == index.max_seq
    assert index.search(tail[300], 1)[0][0] == 10_300
    assert dict(index.search(vectors[0], 5)).get(1, 0.0) < 0.9  # base's old copy left out
    # Saved and loaded together: another process adds nothing.
    index.persist()
    assert len(list(tmp_path.glob("t.seg-*.usearch"))) == 1
    again = VectorIndex(32, tmp_path / "t.usearch", ann_threshold=1_000)
    again.update(_rows(vectors))
    again.update([(10_000 + i, v.tobytes(), built + 1 + i) for i, v in enumerate(tail)])
    again.update([(1, tail[9].tobytes(), built + 10 * len(tail))])
    again.graph_ready()
    again.wait_for_build(60)
    assert again.graph_ready() and again._build is not None and again._build.added == 0
    assert [len(g) for g in again._graphs] == [3_000, len(tail) + 1]
    assert again.search(tail[300], 1)[0][0] == 10_300


def test_segments_of_one_size_merge_into_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loci.store import vector_index

    monkeypatch.setattr(vector_index, "INLINE_TAIL", 10)
    monkeypatch.setattr(vector_index, "SEGMENT_ROWS", 100)
    monkeypatch.setattr(vector_index, "SETTLED", 0.0)
    vectors = _unit(1_500, 24, 21)
    index = _built(tmp_path / "m.usearch", vectors[:1_000])
    exact = VectorIndex(24, ann_threshold=10**9)
    exact.update(_rows(vectors))
    for part in range(5):  # five imports of 100 rows, each its own segment
        index.update(_rows(vectors)[1_000 + 100 * part : 1_100 + 100 * part])
        for _ in range(3):  # start a segment, take it (and start a merge), take that
            index.search(vectors[0], 1)
            index.wait_for_build(60)
        if part == 2:
            index.persist()
    # The fourth segment made four of one size, which were merged.
    index.persist()
    assert [len(g) for g in index._graphs] == [1_000, 400, 100]
    assert index._graphs[1].max_seq == 1_400
    assert len(list(tmp_path.glob("m.seg-*.usearch"))) == 2  # the merged ones' files gone
    for q in _unit(10, 24, 22):
        found = {row for row, _ in index.search(q, 10)}
        assert len(found & {row for row, _ in exact.search(q, 10)}) >= 8
    for row in (1_050, 1_250, 1_450):
        assert index.search(vectors[row - 1], 1)[0][0] == row
    with ann.graph_lock(tmp_path / "m.usearch"):
        ann.remove_graphs(tmp_path / "m.usearch")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lock"]


def test_vectors_in_blocks_read_as_one_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    from loci.store import row_blocks

    monkeypatch.setattr(row_blocks, "BLOCK_ROWS", 7)
    matrix = _unit(40, 8, 13)
    rows = row_blocks.RowBlocks(8)
    for start, stop in ((0, 3), (3, 11), (11, 40)):  # appends that cross blocks
        rows.append(matrix[start:stop])
    rows.set(20, matrix[0])
    matrix[20] = matrix[0]
    query = _unit(1, 8, 14)[0]
    positions = np.array([33, 2, 20, 8, 6, 39], dtype=np.int64)
    assert rows.size == 40
    assert np.array_equal(rows.take(positions), matrix[positions])

    def score(piece: np.ndarray) -> np.ndarray:
        return row_blocks.dot_rows(piece, query)

    assert np.allclose(rows.each(score), matrix @ query, atol=1e-6)
    run = np.arange(5, 30)  # read in place, across blocks
    assert np.allclose(rows.each(score, run), matrix[5:30] @ query, atol=1e-6)
    assert np.allclose(rows.each(score, positions), matrix[positions] @ query, atol=1e-6)
    assert rows.each(score, positions[:0]).shape == (0,)


def test_many_rows_are_scored_only_where_their_signs_are_near(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from loci.store import row_blocks, vector_index

    monkeypatch.setattr(vector_index, "SIGN_SCAN_ROWS", 1_000)
    monkeypatch.setattr(vector_index, "SIGN_CANDIDATES", 200)
    monkeypatch.setattr(vector_index, "SIGN_OVERSAMPLE", 10)
    vectors = _unit(5_000, 48, 15)
    index = VectorIndex(48, ann_threshold=10**9)
    index.update(_rows(vectors))
    scored: list[int] = []

    def counted(piece: np.ndarray, query: np.ndarray) -> np.ndarray:
        scored.append(len(piece))
        return row_blocks.dot_rows(piece, query)

    monkeypatch.setattr(vector_index, "dot_rows", counted)
    near = vectors[1_234] + 0.1 * _unit(1, 48, 16)[0]
    near /= np.linalg.norm(near)
    hits = index.search(near, 10)
    assert hits[0][0] == 1_235 and len(hits) == 10
    assert sum(scored) == 200  # of 5,000 rows, the 200 nearest by sign were scored
    scored.clear()
    index.search(near, 30)  # more wanted: 10 x 30 candidates
    assert sum(scored) == 300
    scored.clear()
    index.search(near, 3, allowed=range(1, 2_001))  # filtered searches stay exact
    assert sum(scored) == 2_000


def test_filtered_searches_stay_exact(tmp_path: Path) -> None:
    vectors = _unit(2_000, 16, 4)
    index = VectorIndex(16, tmp_path / "f.usearch", ann_threshold=500)
    index.update(_rows(vectors))
    hits = index.search(vectors[41], 3, allowed=[42, 7, 9])
    assert hits[0] == (42, hits[0][1]) and abs(hits[0][1] - 1.0) < 1e-5
    assert {i for i, _ in hits} == {42, 7, 9}


def test_exact_scores_in_pieces_equal_one_product() -> None:
    from loci.store.row_blocks import DOT_CHUNK, dot_rows

    for n in (0, 1, DOT_CHUNK, 2 * DOT_CHUNK + 17):
        matrix = _unit(n, 24, 6) if n else np.zeros((0, 24), dtype=np.float32)
        query = _unit(1, 24, 7)[0]
        assert np.allclose(dot_rows(matrix, query), matrix @ query, atol=1e-6)


def test_the_local_model_loads_after_the_graph_was_used(tmp_path: Path) -> None:
    # A fresh process, because the failure was a segfault: with usearch imported first,
    # importing onnxruntime (the bundled model) crashed the interpreter.
    import subprocess
    import sys

    script = (
        "import numpy as np\n"
        "from loci.store.vector_index import VectorIndex\n"
        "x = np.random.default_rng(0).standard_normal((1500, 16)).astype(np.float32)\n"
        "v = VectorIndex(16, ann_threshold=1000)\n"
        "v.update([(i + 1, x[i].tobytes(), i + 1) for i in range(1500)])\n"
        "v.graph_ready(); v.wait_for_build(60)\n"
        "assert v.graph_ready() and v.search(x[0], 1)[0][0] == 1\n"
        "from loci.embeddings import make_embedder\n"
        "print(make_embedder('local').embed(['hello']).shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(1, 384)"


def test_two_builders_of_one_graph_build_it_once(tmp_path: Path) -> None:
    # Two server processes on one database reach the threshold together: the file lock
    # makes the second wait for the first's graph and load it instead of building too.
    from loci.store.ann import GraphBuild

    vectors = _unit(3_000, 32, 8)
    ids = np.arange(1, 3_001, dtype=np.int64)
    builds = [GraphBuild(32, tmp_path / "shared.usearch", ids, ids.copy(), vectors)
              for _ in range(2)]
    for build in builds:
        assert build.wait(120) and build.result is not None
    assert sorted(b.added for b in builds) == [0, 3_000]
    meta = (tmp_path / "shared.json").read_text()
    assert '"max_seq": 3000' in meta
    for build in builds:
        assert build.result is not None and [len(g) for g in build.result] == [3_000]


def test_builds_stop_and_are_waited_for_when_the_process_exits(tmp_path: Path) -> None:
    """At exit a build stops after its current chunk and the exit waits for it: the
    graph library's threads outliving the interpreter aborted the process (exit 134,
    seen at the end of ``benchmarks/cache_stability.py``)."""
    vectors = _unit(20_000, 64, 3)
    ids = np.arange(1, 20_001, dtype=np.int64)
    original = ann.BUILD_CHUNK
    ann.BUILD_CHUNK = 500
    try:
        build = ann.GraphBuild(64, tmp_path / "g.usearch", ids, ids.copy(), vectors)
        assert build in ann._RUNNING
        deadline = time.monotonic() + 30
        while build.added == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        ann._stop_builds()  # what the interpreter runs at exit
        assert build.done() and build not in ann._RUNNING
        assert build.result is None and 0 < build.added < 20_000  # stopped early
        assert not (tmp_path / "g.usearch").exists()  # nothing half-built was saved
    finally:
        ann.BUILD_CHUNK = original
        ann._EXITING.clear()


def test_segment_builds_stop_and_are_waited_for_when_the_process_exits() -> None:
    vectors = _unit(20_000, 64, 4)
    ids = np.arange(1, 20_001, dtype=np.int64)
    original = ann.SEGMENT_CHUNK
    ann.SEGMENT_CHUNK = 200
    try:
        build = ann.SegmentBuild(64, ids, ids.copy(), lambda: vectors)
        assert build in ann._RUNNING
        ann._stop_builds()  # what the interpreter runs at exit
        assert build.done() and build not in ann._RUNNING and build.result is None
    finally:
        ann.SEGMENT_CHUNK = original
        ann._EXITING.clear()
