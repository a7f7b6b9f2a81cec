"""A silo's encoded rows, stored compactly in parts, in memory or spilled to an unnamed file.

Codes are kept in the smallest unsigned type that holds the schema's widest column (one byte
per cell for most tables), and numeric values, for the numeric columns only, as float64. The
first ``SPILL_BYTES`` stay in memory; beyond them every part goes to an anonymous temporary
file (``tempfile.TemporaryFile``: unlinked at creation, so no other process can open it by name
and it vanishes with the process, however it ends), read back one part at a time. A silo's
memory is then bounded by one part plus what is computed from it, not by its row count.
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from .column_groups import covering_groups, summed

#: Encoded rows kept in memory before the store spills to its temporary file (codes and values).
SPILL_BYTES = 256 * 2**20
#: From this many rows, marginals are summed from counts of groups of columns (``column_groups``:
#: fewer, wider counts), taken over slices of ``SLICE_ROWS`` rows.
GROUPED_ROWS = 100_000
SLICE_ROWS = 1 << 20
#: The most bytes of groups' counts one pass over the parts holds.
TABLE_BYTES = 256 * 2**20


def code_dtype(shape: Sequence[int]) -> np.dtype:
    """The smallest unsigned integer type that holds every code of a domain of this ``shape``."""
    widest = max(shape, default=1)
    for dt in (np.uint8, np.uint16, np.uint32):
        if widest <= np.iinfo(dt).max + 1:
            return np.dtype(dt)
    return np.dtype(np.int64)


class RowStore:
    """Rows appended in parts; ``parts()`` gives them back, one part at a time, in order."""

    def __init__(self, shape: Sequence[int], numeric: Sequence[int], spill_bytes: int | None = None):
        self.width = len(shape)
        self.numeric = list(numeric)
        self.dtype = code_dtype(shape)
        self.count = 0
        self.spill_bytes = SPILL_BYTES if spill_bytes is None else spill_bytes
        self._memory: list[tuple[np.ndarray, np.ndarray | None]] = []
        self._memory_bytes = 0
        self._file: Any = None
        self._index: list[tuple[int, int, bool]] = []  # (offset, rows, has values) of each part on file
        self._end = 0
        self.has_values = True

    @classmethod
    def of(cls, codes: np.ndarray, values: np.ndarray | None, shape: Sequence[int], numeric: Sequence[int]):
        """A store holding ``codes`` (and ``values``) as one part, in memory."""
        store = cls(shape, numeric, spill_bytes=2**62)
        store.append(codes, values)
        return store

    @property
    def spilled(self) -> bool:
        """Whether parts have gone to the temporary file."""
        return self._file is not None

    def append(self, codes: np.ndarray, values: np.ndarray | None) -> None:
        """Add ``(n, d)`` codes and, unless None, their ``(n, d)`` values (only the numeric columns are kept)."""
        part = np.ascontiguousarray(codes, dtype=self.dtype)
        nums = None if values is None else np.ascontiguousarray(values[:, self.numeric], dtype=np.float64)
        self.has_values = self.has_values and nums is not None
        self.count += len(part)
        size = part.nbytes + (0 if nums is None else nums.nbytes)
        if self._file is None and self._memory_bytes + size <= self.spill_bytes:
            self._memory.append((part, nums))
            self._memory_bytes += size
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="privsyn-fed-silo-")
            for p, v in self._memory:
                self._write(p, v)
            self._memory, self._memory_bytes = [], 0
        self._write(part, nums)

    def _write(self, part: np.ndarray, nums: np.ndarray | None) -> None:
        data = part.tobytes() + (b"" if nums is None else nums.tobytes())
        os.pwrite(self._file.fileno(), data, self._end)
        self._index.append((self._end, len(part), nums is not None))
        self._end += len(data)

    def parts(self, with_values: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """Each part's codes ``(n, d)`` (compact type) and, ``with_values``, its values ``(n, d)`` (float,
        NaN in the categorical columns; None when the store holds codes only), else None."""
        if self._file is None:
            for part, nums in self._memory:
                yield part, self._widen(nums, len(part)) if with_values else None
            return
        for offset, rows, has in self._index:
            n_codes = rows * self.width * self.dtype.itemsize
            n_nums = rows * len(self.numeric) * 8 if (has and with_values) else 0
            raw = os.pread(self._file.fileno(), n_codes + n_nums, offset)
            part = np.frombuffer(raw, dtype=self.dtype, count=rows * self.width).reshape(rows, self.width)
            nums = None
            if has and with_values:
                nums = np.frombuffer(raw, dtype=np.float64, offset=n_codes).reshape(rows, len(self.numeric))
            yield part, self._widen(nums, rows) if with_values else None

    def _widen(self, nums: np.ndarray | None, rows: int) -> np.ndarray | None:
        if nums is None:
            return None
        values = np.full((rows, self.width), np.nan)
        values[:, self.numeric] = nums
        return values

    def seal(self) -> None:
        """After the last ``append``: join the parts held in memory into one (fewer, larger passes)."""
        if self._file is None and len(self._memory) > 1:
            codes = np.concatenate([p for p, _ in self._memory])
            nums = None
            if all(v is not None for _, v in self._memory):
                nums = np.concatenate([v for _, v in self._memory])
            self._memory = [(codes, nums)]

    def marginals(self, shape: Sequence[int], cliques: Iterable[Sequence[int]]) -> dict[tuple[int, ...], np.ndarray]:
        """The count vector of each clique (``marginal_counts``), in one pass over the parts. From
        ``GROUPED_ROWS`` rows the cliques are summed from the counts of groups of columns holding
        them (``column_groups``), each group counted once over slices of ``SLICE_ROWS`` rows; one
        pass per ``TABLE_BYTES`` of the groups' counts."""
        wanted = [tuple(c) for c in cliques]
        if self.count < GROUPED_ROWS:
            totals = {c: np.zeros(int(np.prod([shape[i] for i in c])), dtype=np.int64) for c in wanted}
            for codes, _ in self.parts():
                for c in totals:
                    totals[c] += marginal_counts(codes, shape, c)
            return totals
        out = {c: np.array([self.count], dtype=np.int64) for c in wanted if not c}
        for groups in _batches(covering_groups(wanted, shape), shape):
            tables = {g: np.zeros(math.prod(shape[j] for j in g), dtype=np.int64) for g in groups}
            for codes, _ in self.parts():
                for start in range(0, len(codes), SLICE_ROWS):
                    columns = np.asfortranarray(codes[start : start + SLICE_ROWS])  # each column contiguous
                    for g in groups:
                        tables[g] += marginal_counts(columns, shape, g)
            for c in wanted:
                home = next((g for g in groups if c and set(c) <= set(g)), None)
                if home is not None and c not in out:
                    out[c] = summed(tables[home], home, shape, c)
        return out

    def close(self) -> None:
        """Drop the parts (and close the temporary file, which removes it)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._memory, self._index = [], []


def _batches(groups: list[tuple[int, ...]], shape: Sequence[int]) -> Iterator[list[tuple[int, ...]]]:
    """The groups in runs whose counts take at most ``TABLE_BYTES`` (at least one group a run)."""
    run: list[tuple[int, ...]] = []
    size = 0
    for g in groups:
        cells = math.prod(shape[j] for j in g)
        if run and (size + cells) * 8 > TABLE_BYTES:
            yield run
            run, size = [], 0
        run.append(g)
        size += cells
    if run:
        yield run


def marginal_counts(codes: np.ndarray, shape: Sequence[int], clique: Sequence[int]) -> np.ndarray:
    """Counts of encoded rows (codes within ``shape``; fastest column-major) over the cells of
    ``clique`` (row-major, int64): one ``bincount`` on the mixed-radix index of the clique's
    columns; the empty clique counts the rows."""
    if not clique:
        return np.array([len(codes)], dtype=np.int64)
    index = codes[:, clique[0]].astype(np.intp)
    for j in clique[1:]:
        index *= shape[j]
        index += codes[:, j]
    return np.bincount(index, minlength=math.prod(shape[j] for j in clique)).astype(np.int64, copy=False)
