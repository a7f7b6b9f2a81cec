"""Graphical-model estimation with mbi (private-pgm 2.x) in float64.

``ModelFitter`` keeps mbi's semantics (mirror descent on the Gaussian log-likelihood
``sum_i ||M_{r_i}(p) - y_i||^2 / (2 sigma_i^2)``, warm-started from the previous potentials)
and adds what long runs need: float64, no persistent compilation cache, repeated measurements of
one clique merged into one (inverse-variance weighting; the loss changes by a constant only), and
a guard that clears JAX's caches before the process nears the kernel's memory-mapping limit.
"""
from __future__ import annotations

import os
import warnings
from typing import Sequence

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import mbi  # noqa: E402
    from mbi import Domain, LinearMeasurement, MarkovRandomField, estimation, junction_tree  # noqa: E402

import numpy as np  # noqa: E402

#: Clear JAX's compiled programs when the process holds this many memory mappings
#: (the kernel default limit is 65,530; every compiled program adds some).
MAP_COUNT_LIMIT = 30_000


def make_domain(names: Sequence[str], shape: Sequence[int]) -> Domain:
    return Domain(list(names), list(shape))


def merge_measurements(measurements: Sequence[tuple[tuple[str, ...], np.ndarray, float]]) -> list[LinearMeasurement]:
    """One ``LinearMeasurement`` per clique: ``y = sum(y_i / s_i^2) / sum(1 / s_i^2)``,
    ``s = sum(1 / s_i^2)^(-1/2)``."""
    groups: dict[tuple[str, ...], list[tuple[np.ndarray, float]]] = {}
    for clique, y, sigma in measurements:
        groups.setdefault(tuple(clique), []).append((np.asarray(y, dtype=float), float(sigma)))
    merged = []
    for clique, items in groups.items():
        precision = sum(1.0 / s ** 2 for _, s in items)
        y = sum(v / s ** 2 for v, s in items) / precision
        merged.append(LinearMeasurement(y, clique, stddev=float(precision ** -0.5)))
    return merged


def map_count() -> int:
    try:
        with open(f"/proc/{os.getpid()}/maps", "rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


class ModelFitter:
    """Fits a Markov random field to noisy marginals, warm-starting round after round."""

    def __init__(self, domain: Domain, iters: int = 1000):
        self.domain = domain
        self.iters = iters
        self.estimator = estimation.MirrorDescent()
        self.model: MarkovRandomField | None = None

    def fit(self, measurements: Sequence[tuple[tuple[str, ...], np.ndarray, float]],
            iters: int | None = None) -> MarkovRandomField:
        if map_count() > MAP_COUNT_LIMIT:
            jax.clear_caches()
        merged = merge_measurements(measurements)
        self.model = self.estimator.estimate(self.domain, merged, iters=iters or self.iters,
                                             warm_start=self.model)
        return self.model


class MarginalReader:
    """The fitted model's marginals over arbitrary cliques, computed in numpy.

    mbi's ``project`` compiles a new XLA program for every clique outside the model, which made
    scoring AIM's candidates cost seconds each. Here a clique inside a model clique is summed out
    of that clique's marginal; any other is the contraction
    ``mu_r(x_r) = N * sum_{x not in r} prod_c exp(theta_c(x_c)) / Z`` of the model's potentials
    (variable elimination by an optimised einsum path), which is the same quantity.
    """

    def __init__(self, model: MarkovRandomField):
        self.total = float(model.total)
        self.marginals = {tuple(cl): np.asarray(model.marginals[cl].values, dtype=float)
                          for cl in model.marginals.cliques}
        self.factors = []
        for cl in model.potentials.cliques:
            theta = np.asarray(model.potentials[cl].values, dtype=float)
            self.factors.append((tuple(cl), np.exp(theta - theta.max())))
        self._index = {a: i for i, a in enumerate(model.domain.attributes)}

    def __call__(self, clique: Sequence[str]) -> np.ndarray:
        """Flat float64 vector over ``clique``'s cells in row-major order."""
        clique = tuple(clique)
        for cl, mu in self.marginals.items():
            if set(clique) <= set(cl):
                axes = tuple(i for i, a in enumerate(cl) if a not in clique)
                kept = [a for a in cl if a in clique]
                out = mu.sum(axis=axes) if axes else mu
                return np.transpose(out, [kept.index(a) for a in clique]).ravel()
        import opt_einsum

        operands = []
        for cl, table in self.factors:
            operands += [table, [self._index[a] for a in cl]]
        out = opt_einsum.contract(*operands, [self._index[a] for a in clique], optimize="greedy")
        return (out / out.sum() * self.total).ravel()


def model_marginal(model: MarkovRandomField, clique: Sequence[str]) -> np.ndarray:
    """The model's marginal over ``clique`` as a flat float64 vector (row-major)."""
    return MarginalReader(model)(clique)


def model_cliques(model: MarkovRandomField) -> list[tuple[str, ...]]:
    return [tuple(c) for c in model.cliques]


def hypothetical_size_mb(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """Junction-tree size in MB (8 bytes a cell over the maximal cliques), as mbi computes it."""
    return float(junction_tree.hypothetical_model_size(domain, [tuple(c) for c in cliques]))


def covered_cliques(cliques: Sequence[Sequence[str]]) -> set[frozenset[str]]:
    """Every subset of a model clique: marginals the model already represents exactly."""
    import itertools

    out: set[frozenset[str]] = set()
    for c in cliques:
        for k in range(1, len(c) + 1):
            out.update(frozenset(s) for s in itertools.combinations(c, k))
    return out


def sample_codes(model: MarkovRandomField, names: Sequence[str], rows: int, seed: int | None) -> np.ndarray:
    """Synthetic rows from the model as an ``(rows, d)`` code array in ``names`` order.

    mbi samples with numpy's global generator; a seed is applied to it for this call only.
    """
    state = np.random.get_state()
    if seed is not None:
        np.random.seed(seed % 2**32)
    try:
        ds = model.synthetic_data(rows=rows)
    finally:
        if seed is not None:
            np.random.set_state(state)
    columns = ds.to_dict()
    return np.stack([np.asarray(columns[n]) for n in names], axis=1).astype(np.int64)
