"""Marginals on merged bins: a 2-way marginal whose columns' cells are merged into a few
contiguous groups (public: from the schema's shape alone), measured and fitted as such while the
model keeps every column's own cells.

A column with ``c`` cells in ``k`` groups has groups starting at ``floor(i c / k)``,
``i = 0 .. k - 1`` (all its cells when ``c <= k``). The merged marginal over columns ``(a, b)`` is
``G_a M_ab G_b^T`` for the 0/1 matrices ``G`` that sum each group's cells: a record is in one cell
of ``M_ab`` and so in one cell of the merged marginal, whose L1 and L2 sensitivities are therefore
1, as a count marginal's are. It has ``k_a k_b`` cells instead of ``c_a c_b``: on a small table a
pair of 32-bin columns measured on 4 groups each has 16 cells whose noise is 64 times smaller in
L1 than on 1,024 cells, so the dependence between the columns shows above the noise.

The model is fitted to it through the linear query ``G_a mu_ab G_b^T`` (``BlockQuery`` for mbi;
each fine cell's group, as index arrays, for the numpy fit: ``mirror.Plan``): the loss is
``||G mu - y||^2 / (2 sigma^2)`` with gradient ``G^T (G mu - y) / sigma^2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

#: Starts of each column's groups: one tuple of cell indices per column of a marginal.
Starts = tuple[tuple[int, ...], ...]
#: ``measure_pairs([(pair, starts, query), ...], sigma)``: each pair's marginal, on merged bins where
#: ``starts`` gives them, plus ``N(0, sigma^2)``, all charged together before any is released.
MeasurePairs = Callable[[Sequence[tuple[tuple[str, ...], Starts | None, str]], float], list[np.ndarray]]


def group_starts(cells: int, groups: int) -> tuple[int, ...]:
    """``k = min(cells, groups)`` contiguous groups of ``cells`` cells: group ``i`` starts at
    ``floor(i cells / k)`` (sizes differ by at most one)."""
    k = max(1, min(int(cells), int(groups)))
    return tuple(i * int(cells) // k for i in range(k))


def group_sizes(cells: int, starts: Sequence[int]) -> list[int]:
    """The cells in each group: the differences of consecutive starts (the last runs to ``cells``)."""
    ends = list(starts[1:]) + [int(cells)]
    return [e - s for s, e in zip(starts, ends)]


def coarse_cells(starts: Starts) -> int:
    """Cells of a merged marginal: the product of its columns' numbers of groups."""
    return math.prod(len(s) for s in starts)


def coarsen(table: np.ndarray, starts: Starts, axes: Sequence[int] | None = None) -> np.ndarray:
    """``table`` with the cells of each of its ``axes`` (default all, in order) summed within groups."""
    out = np.asarray(table)
    for axis, s in zip(range(out.ndim) if axes is None else axes, starts):
        out = np.add.reduceat(out, np.asarray(s, dtype=np.intp), axis=axis)
    return out


@dataclass(frozen=True)
class BlockQuery:
    """mbi's linear query of a merged marginal: ``G_a mu G_b^T`` on the clique's factor. Hashable
    by value (its starts and the fine shape), as mbi's compiled programs need."""

    starts: Starts
    shape: tuple[int, ...]
    #: A merged marginal does not estimate the total as an identity query does (mbi's rule).
    use_for_total_estimation: bool = False

    def __call__(self, factor: Any) -> Any:
        """The merged marginal of ``factor`` (over the measurement's clique), flattened."""
        import jax.numpy as jnp

        out = factor.values
        for axis, (s, c) in enumerate(zip(self.starts, self.shape)):
            g = np.zeros((len(s), c))
            for i, (a, n) in enumerate(zip(s, group_sizes(c, s))):
                g[i, a : a + n] = 1.0
            out = jnp.moveaxis(jnp.tensordot(jnp.asarray(g), out, axes=([1], [axis])), 0, axis)
        return out.reshape(-1)

    def op_norm_sq(self) -> float:
        """``||G||_2^2``: the product over the axes of the largest group's size."""
        return float(math.prod(max(group_sizes(c, s)) for s, c in zip(self.starts, self.shape)))


@dataclass(frozen=True)
class MergedMarginalQuery:
    """A silo's marginal over ``clique`` (column indices) on merged bins (``coarsen`` at ``starts``),
    flattened: the declared query a federated run sums over the silos (``silo.queries.Query``).
    In-process aggregators only: MPC parties do not answer it (``--find-dependence`` is refused
    there)."""

    clique: tuple[int, ...]
    starts: Starts
    real = False

    def __call__(self, silo: Any) -> np.ndarray:
        """The silo's counts on the merged bins."""
        counts = silo.marginals((self.clique,))[self.clique]
        fine = [int(silo.schema.shape[i]) for i in self.clique]
        return coarsen(np.asarray(counts).reshape(fine), self.starts).ravel()

    def size(self, schema: Any) -> int:
        """``coarse_cells``: known from the public starts."""
        return coarse_cells(self.starts)

    def to_wire(self) -> tuple[dict, dict[str, np.ndarray]]:
        """A header naming the clique and the groups; no arrays."""
        return {"kind": "merged-marginal", "clique": list(self.clique), "starts": [list(s) for s in self.starts]}, {}
