"""Vectors held in memory for exact search: growable blocks, scored in small pieces.

:class:`RowBlocks` keeps rows in fixed-size blocks, so growing never copies what is
there (one contiguous matrix was copied whole each time it doubled: hundreds of
milliseconds at 100k rows, inside a search). Each float row may have a row of **sign
bits** beside it (one bit a dimension, ``sign_words``): comparing those reads 1/32 of
the bytes, so a search over many rows scores exactly only the rows whose signs are
nearest the query's (``benchmarks/RESULTS.md`` has the recall this keeps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
Positions = npt.NDArray[np.int64]

#: Rows per matrix-vector product. One product over all rows lets OpenBLAS split it
#: across threads, which on busy cores is many times slower than small pieces.
DOT_CHUNK = 1024
#: Rows per block (a multiple of ``DOT_CHUNK``).
BLOCK_ROWS = 16 * DOT_CHUNK


def dot_rows(matrix: Matrix, query: Matrix) -> Matrix:
    """``matrix @ query`` in pieces small enough to stay on one thread and in the cache."""
    out = np.empty(matrix.shape[0], dtype=np.float32)
    for start in range(0, matrix.shape[0], DOT_CHUNK):
        np.matmul(matrix[start : start + DOT_CHUNK], query, out=out[start : start + DOT_CHUNK])
    return out


def sign_words(vectors: Matrix) -> npt.NDArray[np.uint64]:
    """One bit a dimension (set where the value is positive), packed in 64-bit words."""
    bits = np.packbits(vectors > 0, axis=1)
    pad = -bits.shape[1] % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(bits).view(np.uint64)


def differing_bits(words: npt.NDArray[np.uint64], query: npt.NDArray[np.uint64]
                   ) -> npt.NDArray[np.uint16]:
    """How many sign bits of each row differ from the query's."""
    counts: npt.NDArray[np.uint16] = np.bitwise_count(words ^ query).sum(axis=1, dtype=np.uint16)
    return counts


class RowBlocks:
    """Rows of ``width`` values of one dtype, addressed by position. ``take`` may run on
    another thread while rows are appended: blocks are added, never moved (a row set
    meanwhile may be read half old, half new; its owner knows it changed)."""

    def __init__(self, width: int, dtype: type[np.generic] = np.float32) -> None:
        self.width = width
        self.dtype = dtype
        self.size = 0
        self._blocks: list[npt.NDArray[Any]] = []

    def append(self, rows: npt.NDArray[Any]) -> None:
        done = 0
        while done < len(rows):
            block, offset = divmod(self.size, BLOCK_ROWS)
            if block == len(self._blocks):
                self._blocks.append(np.empty((BLOCK_ROWS, self.width), dtype=self.dtype))
            count = min(BLOCK_ROWS - offset, len(rows) - done)
            self._blocks[block][offset : offset + count] = rows[done : done + count]
            done += count
            self.size += count

    @property
    def nbytes(self) -> int:
        """Bytes of the rows held (a block's rows not written yet are not resident)."""
        return self.size * self.width * np.dtype(self.dtype).itemsize

    def set(self, at: int, row: npt.NDArray[Any]) -> None:
        self._blocks[at // BLOCK_ROWS][at % BLOCK_ROWS] = row

    def take(self, positions: Positions) -> npt.NDArray[Any]:
        """The rows at ``positions``, in that order (a copy)."""
        out = np.empty((len(positions), self.width), dtype=self.dtype)
        which = positions // BLOCK_ROWS
        for block in np.unique(which).tolist():
            picked = which == block
            out[picked] = self._blocks[block][positions[picked] - block * BLOCK_ROWS]
        return out

    def each(self, measure: Callable[[npt.NDArray[Any]], npt.NDArray[Any]],
             positions: Positions | None = None) -> npt.NDArray[Any]:
        """``measure`` of every row (or of the rows at ``positions``, in that order),
        applied to pieces of at most a block; a run of consecutive positions is read in
        place rather than gathered."""
        return np.concatenate([measure(piece) for piece in self._pieces(positions)])

    def _pieces(self, positions: Positions | None) -> Iterator[npt.NDArray[Any]]:
        yield np.empty((0, self.width), dtype=self.dtype)
        if positions is not None and len(positions) and not bool(
                np.all(np.diff(positions) == 1)):
            for start in range(0, len(positions), DOT_CHUNK):
                yield self.take(positions[start : start + DOT_CHUNK])
            return
        start, stop = (0, self.size) if positions is None else (
            (int(positions[0]), int(positions[-1]) + 1) if len(positions) else (0, 0))
        while start < stop:
            block, offset = divmod(start, BLOCK_ROWS)
            count = min(BLOCK_ROWS - offset, stop - start)
            yield self._blocks[block][offset : offset + count]
            start += count
