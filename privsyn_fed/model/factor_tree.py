"""A released graphical model as a junction tree of normalised factors, in numpy.

``p(x) = prod_C f_C(x_C)`` over the maximal cliques ``C`` of a junction tree (a forest when the model
is disconnected): at a root, ``f_C`` is the clique's marginal distribution; at any other clique, the
conditional ``p(x_{C - S} | x_S)`` given its separator ``S = C ∩ parent(C)``. The factors are kept
children before parents. The independent model is the forest of one-column cliques.

* **Sampling** draws the cliques parents first, each clique's new columns from its conditional given
  the separator's codes already drawn (ancestral sampling: exact). Within each group of rows sharing a
  separator value the uniforms are stratified (``(rank + U) / count``), as mbi's randomised rounding
  does, so a sample's marginals follow the model's more closely than independent draws would.
* **Conditioning** on public evidence ``w_j(x_j) in [0, 1]`` per column (an indicator, or the share of
  a bin's values inside a range) multiplies each ``w_j`` into one clique holding ``j`` and renormalises
  by one upward pass: ``m_C(x_S) = sum_{x_{C-S}} g_C``, ``g_C <- g_C / m_C``, ``g_parent *= m_C``;
  the roots' sums multiply to ``P(evidence)``. The result is again such a tree: exact.

The model is post-processing of a release's noisy measurements; nothing here reads rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

#: Below this probability a condition counts as impossible (the factors' own floating-point noise).
IMPOSSIBLE = 1e-300


@dataclass
class JunctionTree:
    """``p(x) = prod_i f_i`` (module docstring): ``factors`` children before parents, ``parents[i]``
    the index of factor ``i``'s parent (``-1`` for a root), ``total`` the release's noisy row count."""

    factors: list[tuple[tuple[str, ...], np.ndarray]]
    parents: list[int]
    total: float

    def __post_init__(self) -> None:
        if len(self.parents) != len(self.factors):
            raise ValueError("one parent index per factor")
        for i, (clique, table) in enumerate(self.factors):
            if table.ndim != len(clique):
                raise ValueError(f"factor over {clique} has {table.ndim} axes")
            p = self.parents[i]
            if p != -1 and not i < p < len(self.factors):
                raise ValueError(f"factor {i}'s parent {p} does not come after it")

    @property
    def attributes(self) -> list[str]:
        """Every column the model covers."""
        return sorted({a for clique, _ in self.factors for a in clique})

    def sizes(self) -> dict[str, int]:
        """Each column's number of cells, as the factors' axes give it."""
        return {a: n for clique, table in self.factors for a, n in zip(clique, table.shape)}

    def separator(self, i: int) -> tuple[str, ...]:
        """Factor ``i``'s columns shared with its parent (in the factor's order); ``()`` at a root."""
        p = self.parents[i]
        if p < 0:
            return ()
        theirs = set(self.factors[p][0])
        return tuple(a for a in self.factors[i][0] if a in theirs)

    def column_marginals(self) -> dict[str, np.ndarray]:
        """Each column's marginal distribution: the cliques' joint marginals parents first (a root's is
        its factor; a child's is its conditional times its separator's marginal in the parent's), each
        column summed out of the first clique holding it."""
        joint: dict[int, np.ndarray] = {}
        out: dict[str, np.ndarray] = {}
        for i in reversed(range(len(self.factors))):
            clique, table = self.factors[i]
            p = self.parents[i]
            if p < 0:
                joint[i] = table
            else:
                parent = self.factors[p][0]
                sep = self.separator(i)
                above = joint[p].sum(axis=tuple(k for k, a in enumerate(parent) if a not in sep))
                joint[i] = table * aligned(above, [a for a in parent if a in sep], clique)
            for k, a in enumerate(clique):
                if a not in out:
                    out[a] = joint[i].sum(axis=tuple(x for x in range(len(clique)) if x != k))
        return out

    def log_likelihood(self, codes: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """``log p(x)`` (natural log) of each encoded row; the columns of ``codes`` follow ``names``."""
        column = {n: i for i, n in enumerate(names)}
        out = np.zeros(len(codes))
        for clique, table in self.factors:
            out += np.log(np.maximum(table[tuple(codes[:, column[a]] for a in clique)], 1e-300))
        return out

    def conditioned(self, weights: Mapping[str, np.ndarray]) -> tuple["JunctionTree", float]:
        """The model given evidence ``weights[column]`` (non-negative, one per cell), and the
        evidence's probability ``sum_x p(x) prod_j w_j(x_j)`` (module docstring)."""
        tables = [t.astype(float, copy=True) for _, t in self.factors]
        for column, w in weights.items():
            i = next((k for k, (clique, _) in enumerate(self.factors) if column in clique), None)
            if i is None:
                raise KeyError(column)
            clique = self.factors[i][0]
            tables[i] = tables[i] * _along(np.asarray(w, dtype=float), clique.index(column), len(clique))
        probability = 1.0
        for i, (clique, _) in enumerate(self.factors):
            p = self.parents[i]
            if p < 0:
                z = float(tables[i].sum())
                probability *= z
                tables[i] = tables[i] / z if z > 0 else tables[i]
                continue
            sep = self.separator(i)
            out = tuple(k for k, a in enumerate(clique) if a not in sep)
            message = tables[i].sum(axis=out) if out else tables[i]
            safe = np.where(message > 0, message, 1.0)
            tables[i] = tables[i] / aligned(safe, sep, clique)
            tables[p] = tables[p] * aligned(message, sep, self.factors[p][0])
        if not probability > IMPOSSIBLE:
            probability = 0.0
        factors = [(clique, t) for (clique, _), t in zip(self.factors, tables)]
        return JunctionTree(factors, list(self.parents), self.total), probability

    def sample_codes(self, rows: int, rng: np.random.Generator, names: Sequence[str]) -> np.ndarray:
        """``rows`` rows as an ``(rows, d)`` code array in ``names`` order, drawn parents first
        (module docstring) with ``rng``."""
        drawn: dict[str, np.ndarray] = {}
        sizes = self.sizes()
        for i in reversed(range(len(self.factors))):
            clique, table = self.factors[i]
            given = [a for a in clique if a in drawn]
            new = [a for a in clique if a not in drawn]
            if not new:
                continue
            t = np.transpose(table, [clique.index(a) for a in given + new])
            n_new = math.prod(sizes[a] for a in new)
            t = t.reshape(-1, n_new)
            group = (
                np.ravel_multi_index([drawn[a] for a in given], [sizes[a] for a in given])
                if given
                else np.zeros(rows, dtype=np.int64)
            )
            picked = stratified_pick(t, group, rng)
            for a, codes in zip(new, np.unravel_index(picked, [sizes[a] for a in new])):
                drawn[a] = codes.astype(np.int64)
        missing = [n for n in names if n not in drawn]
        if missing:
            raise ValueError(f"the model does not cover column(s) {', '.join(missing)}")
        return np.stack([drawn[n] for n in names], axis=1) if names else np.zeros((rows, 0), dtype=np.int64)


def stratified_pick(table: np.ndarray, group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each row ``r``, a cell drawn from ``table[group[r]]`` (a distribution over the last axis,
    normalised here). Rows of one group get the stratified uniforms ``(rank + U) / count`` with ranks
    in random order, so each group's draws are spread over its distribution as evenly as chance
    allows; every row's draw still has the row's distribution. A cell of probability 0 is never drawn."""
    rows = len(group)
    if rows == 0:
        return np.zeros(0, dtype=np.int64)
    order = rng.permutation(rows)
    order = order[np.argsort(group[order], kind="stable")]
    ordered = group[order]
    sizes = np.bincount(ordered, minlength=len(table))
    start = (np.cumsum(sizes) - sizes)[ordered]
    u_ordered = (np.arange(rows) - start + rng.random(rows)) / sizes[ordered]
    n = table.shape[1]
    mass = np.maximum(table, 0.0)
    cdf = np.cumsum(mass, axis=1)
    total = cdf[:, -1:]
    cdf = cdf / np.where(total > 0, total, 1.0)
    last = n - 1 - np.argmax(mass[:, ::-1] > 0, axis=1)  # each row's last cell of positive mass
    cdf[np.arange(n)[None, :] >= last[:, None]] = 1.0
    flat = (cdf + np.arange(len(table))[:, None]).ravel()
    picked = np.empty(rows, dtype=np.int64)
    # the queries in group order are sorted (ranks rise within a group): a cache-friendly search
    picked[order] = np.searchsorted(flat, ordered + u_ordered, side="right") - ordered * n
    return np.clip(picked, 0, n - 1)


def _along(w: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """``w`` shaped to broadcast along ``axis`` of an ``ndim``-axis table."""
    shape = [1] * ndim
    shape[axis] = len(w)
    return w.reshape(shape)


def aligned(table: np.ndarray, attrs: Sequence[str], target: Sequence[str]) -> np.ndarray:
    """View ``table`` (axes ``attrs``, columns of ``target`` in any order) with its axes in ``target``
    order, size 1 on the others, to broadcast against a table over ``target``."""
    order = sorted(range(len(attrs)), key=lambda i: target.index(attrs[i]))
    shape = [1] * len(target)
    for i in order:
        shape[target.index(attrs[i])] = table.shape[i]
    return np.transpose(table, order).reshape(shape)


def independent_tree(probabilities: Sequence[np.ndarray], names: Sequence[str], total: float) -> JunctionTree:
    """The independent model as a forest of one-column roots."""
    factors: list[tuple[tuple[str, ...], np.ndarray]] = [
        ((n,), np.asarray(p, dtype=float)) for n, p in zip(names, probabilities)
    ]
    return JunctionTree(factors, [-1] * len(factors), float(total))
