"""Sums over flat vectors through fixed index maps, the pieces of ``mirror.Plan``'s steps.

``Sums`` applies a 0/1 matrix to a vector, ``y[i] = sum_{k: into[k] = i} x[source[k]]``
(marginalising a node onto a separator, adding potentials into nodes, reading a measurement's
cells), as a sparse product or a ``bincount``, in two halves on two threads where that pays
(``halves``). ``cell_map`` gives, for every cell of a table, the cell of its projection onto some
of its columns; ``joined`` lays index arrays end to end.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import halves


def cell_map(table: Sequence[str], shape: Sequence[int], onto: Sequence[str], onto_shape: Sequence[int]) -> np.ndarray:
    """For every cell of a table over ``table`` (row-major), the cell of the table over ``onto`` (a
    subset of its columns, in any order) that it sums into."""
    out = np.zeros(tuple(shape), dtype=np.intp)
    stride = 1
    for a, size in zip(reversed(onto), reversed(onto_shape)):  # row-major: the last column's stride is 1
        k = list(table).index(a)
        out += (np.arange(shape[k], dtype=np.intp) * stride).reshape([-1 if i == k else 1 for i in range(len(shape))])
        stride *= size
    return out.ravel()


#: A sum over at least this many cells goes through a sparse 0/1 matrix (scipy's CSR product, about
#: 3x faster than ``bincount`` on large tables); a smaller one through ``bincount``, which costs
#: less per call (both measured in benchmarks/README.md, "Flat steps").
SPARSE_CELLS = 2048


class Sums:
    """``y[i] = sum_{k: into[k] = i} x[source[k]]``, ``y`` of length ``size`` and ``x`` of length
    ``width``: a 0/1 matrix applied to a vector (marginalising, routing, a query's cells)."""

    def __init__(
        self, into: np.ndarray, source: np.ndarray, size: int, width: int, cut: int | None = None, matrix: Any = None
    ):
        """``cut``: the row where the product's halves part (by default, where the product is worth
        two threads, where the nonzeros are about even); ``matrix``: the 0/1 matrix, when already made."""
        self.into, self.source, self.size, self.width = into, source, int(size), int(width)
        #: Whether a ``bincount`` sum's ``source`` is every cell in order (a node summed onto a
        #: separator): no gather needed. Not looked for where the sum is a sparse product.
        self.in_order = (
            into.size < SPARSE_CELLS
            and source.size == self.width
            and bool(np.array_equal(source, np.arange(self.width)))
        )
        self.matrix = None
        #: The matrix's rows in two parts of about equal nonzeros, where the product is worth two threads.
        self.halves = None
        if into.size >= SPARSE_CELLS:
            from scipy.sparse import csr_matrix

            self.matrix = (
                matrix
                if matrix is not None
                else csr_matrix((np.ones(into.size), (into, source)), shape=(self.size, self.width))
            )
            if cut is None and self.size > 1 and halves.split(into.size):
                cut = int(np.searchsorted(self.matrix.indptr, self.matrix.nnz // 2).clip(1, self.size - 1))
            if cut is not None:
                self.halves, self.matrix = (self.matrix[:cut], self.matrix[cut:]), None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The sums ``y`` of ``x``."""
        if self.halves is not None:
            return np.concatenate(halves.both(lambda: self.upper(x), lambda: self.lower(x)))
        return self.lower(x)

    def upper(self, x: np.ndarray) -> np.ndarray:
        """The sums of the rows before the halves' cut (where there are halves)."""
        assert self.halves is not None
        return self.halves[0] @ x

    def lower(self, x: np.ndarray) -> np.ndarray:
        """The sums of the rows from the halves' cut, or of every row where there are no halves."""
        if self.halves is not None:
            return self.halves[1] @ x
        if self.matrix is not None:
            return self.matrix @ x
        return np.bincount(self.into, weights=x if self.in_order else x[self.source], minlength=self.size)

    def transposed(self) -> Sums:
        """The transposed matrix (the adjoint): ``into`` and ``source`` swapped (a sparse matrix
        transposed in linear time, with the same entries as one made from the swapped indices)."""
        matrix = None
        if self.halves is not None or self.matrix is not None:
            from scipy.sparse import vstack

            matrix = (self.matrix if self.halves is None else vstack(self.halves, format="csr")).T.tocsr()
        return Sums(self.source, self.into, self.width, self.size, matrix=matrix)


def joined(parts: Sequence[np.ndarray], dtype: type = np.intp) -> np.ndarray:
    """``parts`` end to end (an empty array of ``dtype`` when there are none: a model with no
    measurements)."""
    return np.concatenate(parts).astype(dtype, copy=False) if len(parts) else np.zeros(0, dtype=dtype)
