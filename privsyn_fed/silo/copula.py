"""The Gaussian copula's building blocks (numpy and scipy only; silos use them to encode rows).

* ``ICDM``: categories (or mixture components) laid out on ``[lambda, 1 - lambda]`` by
  probability; a value's code is ``Phi^-1(u)`` with ``u`` uniform on its interval.
* ``Mixture`` / ``fit_mixture``: a 1-D Gaussian mixture fitted by weighted EM to a histogram.
* ``ModeCDF`` / ``mode_cdf``: mode-specific normalisation of a numeric column, ``a = Phi^-1(F_t(c))``.
* ``correlation_estimate``, ``universal_threshold``, ``repair_correlation``: the copula's
  correlation from a noisy second moment (post-processing).
* ``upper`` / ``from_upper``: a symmetric matrix as its upper triangle and back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..schema import NumericColumn, bin_edges, numeric_bin


def ndtr(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF (scipy's, imported on first use: importing the package, as ``audit``
    and ``--help`` do, no longer loads ``scipy.special``, about 0.07 s of start-up)."""
    from scipy.special import ndtr as cdf

    return cdf(x)


def ndtri(u: np.ndarray) -> np.ndarray:
    """The standard normal quantile (scipy's, imported on first use, as ``ndtr``)."""
    from scipy.special import ndtri as quantile

    return quantile(u)


MIN_WEIGHT = 0.005
EM_ITERATIONS = 200


# ---- ICDM ---------------------------------------------------------------------------------------


@dataclass
class ICDM:
    """Categories laid out on ``[lam, 1 - lam]`` in ``order`` (default: by probability, ascending,
    ties by position); category ``j`` owns ``[lo_j, hi_j)`` of length ``(1 - 2 lam) p_j``; its code
    is ``Phi^-1(u)`` with ``u`` uniform there (so even a tiny category keeps its own interval)."""

    probs: np.ndarray
    lam: float = 1e-4
    order: np.ndarray | None = None
    lo: np.ndarray = field(init=False)
    hi: np.ndarray = field(init=False)

    def __post_init__(self):
        p = np.asarray(self.probs, dtype=float)
        order = np.lexsort((np.arange(len(p)), p)) if self.order is None else np.asarray(self.order, dtype=np.int64)
        cum = np.concatenate([[0.0], np.cumsum(p[order])])
        cum = self.lam + (1.0 - 2.0 * self.lam) * cum / cum[-1]  # laid out on [lam, 1 - lam]
        self.lo, self.hi = np.empty(len(p)), np.empty(len(p))
        self.lo[order], self.hi[order] = cum[:-1], cum[1:]
        self._order, self._cum = order, cum

    def encode(self, index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``Phi^-1(u)`` for each category in ``index``, ``u`` uniform on that category's interval."""
        u = self.lo[index] + rng.random(len(index)) * (self.hi[index] - self.lo[index])
        return ndtri(u)

    def decode(self, x: np.ndarray) -> np.ndarray:
        """The category whose interval holds ``Phi(x)`` (compared in x space: ``Phi`` is monotone)."""
        pos = np.searchsorted(ndtri(self._cum).astype(x.dtype), x, side="right") - 1
        return self._order[np.clip(pos, 0, len(self._order) - 1)]


# ---- numeric columns: mixtures from noisy histograms ---------------------------------------------


@dataclass
class Mixture:
    """A 1-D Gaussian mixture: component weights, means and standard deviations."""

    weights: np.ndarray
    means: np.ndarray
    sds: np.ndarray

    def posterior(self, x: np.ndarray) -> np.ndarray:
        """Each component's responsibility ``P[t | x]`` for each value of ``x`` (rows sum to 1)."""
        z = (x[:, None] - self.means) / self.sds
        logp = np.log(self.weights) - np.log(self.sds) - 0.5 * z**2
        logp -= logp.max(axis=1, keepdims=True)
        p = np.exp(logp)
        return p / p.sum(axis=1, keepdims=True)


def fit_mixture(col: NumericColumn, counts: np.ndarray, components: int) -> Mixture:
    """Weighted 1-D EM on the bin centres with weights ``max(count, 0)`` (a fixed number of
    iterations); each bin also contributes its within-bin variance ``width^2 / 12``."""
    lo, hi = bin_edges(col)
    centres = (lo + hi) / 2.0
    width = np.where(hi > lo, hi - lo, 0.0) + (1.0 if col.integer else 0.0)
    span = max(col.upper - col.lower, 1.0 if col.integer else 0.0)
    floor = max(span / 1000.0, 1e-9) if span > 0 else 1.0
    w = np.clip(np.asarray(counts, dtype=float), 0.0, None)
    if w.sum() <= 0 or span == 0:
        return Mixture(np.ones(1), np.array([(col.lower + col.upper) / 2.0]), np.array([max(span / 4.0, floor)]))
    k = min(int(components), int(np.count_nonzero(w)))
    cdf = np.cumsum(w) / w.sum()
    means = centres[np.minimum(np.searchsorted(cdf, (np.arange(k) + 0.5) / k), len(centres) - 1)].astype(float)
    sds = np.full(k, max(span / (2.0 * k), floor))
    weights = np.full(k, 1.0 / k)
    within = width**2 / 12.0
    for _ in range(EM_ITERATIONS):
        r = Mixture(weights, means, sds).posterior(centres) * w[:, None]
        mass = r.sum(axis=0) + 1e-12
        weights = mass / mass.sum()
        means = (r * centres[:, None]).sum(axis=0) / mass
        var = (r * ((centres[:, None] - means) ** 2 + within[:, None])).sum(axis=0) / mass
        sds = np.sqrt(np.maximum(var, floor**2))
    keep = weights >= MIN_WEIGHT
    return Mixture(weights[keep] / weights[keep].sum(), means[keep], sds[keep])


# ---- the copula ---------------------------------------------------------------------------------


@dataclass
class ModeCDF:
    """Mode-specific normalisation of one numeric column from its noisy histogram and mixture.

    ``mass[b, t]`` is bin ``b``'s noisy count (floored at zero, plus a tiny floor) shared among the
    components by their responsibilities at the bin centre. A value in bin ``b`` joins component
    ``t`` with probability ``mass[b, t] / sum_t mass[b, t]`` and is normalised by that component's
    CDF, linear inside each bin: ``a = Phi^-1(F_t(c))``, clamped to ``[lam, 1 - lam]`` (so
    ``|a| <= Phi^-1(1 - lam)``, 3.72 for the default). Decoding inverts ``F_t`` exactly; whole
    numbers are spread over ``[k, k + 1)`` before encoding and floored after decoding.
    """

    col: NumericColumn
    mass: np.ndarray
    lam: float

    def __post_init__(self):
        lo, hi = bin_edges(self.col)
        self.lo = lo.astype(float)
        self.width = (hi - lo + (1.0 if self.col.integer else 0.0)).astype(float)
        self.cum = np.vstack([np.zeros(self.mass.shape[1]), np.cumsum(self.mass, axis=0)])  # (B+1, T)

    @property
    def components(self) -> int:
        """The number of mixture components ``T`` (columns of ``mass``)."""
        return self.mass.shape[1]

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(component, a)`` for values ``x`` (inside the bounds)."""
        b = numeric_bin(self.col, x)
        share = self.mass[b] / self.mass[b].sum(axis=1, keepdims=True)
        t = (share.cumsum(axis=1) > rng.random(len(x))[:, None]).argmax(axis=1)
        pos = x + (rng.random(len(x)) if self.col.integer else 0.0)
        frac = np.clip((pos - self.lo[b]) / np.where(self.width[b] > 0, self.width[b], 1.0), 0.0, 1.0)
        u = (self.cum[b, t] + frac * self.mass[b, t]) / self.cum[-1, t]
        return t, ndtri(np.clip(u, self.lam, 1 - self.lam))

    def decode(self, t: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Values from ``(t, a)``: ``F_t^-1(Phi(a))``, floored for whole numbers, clipped to the bounds."""
        target = ndtr(a) * self.cum[-1, t]
        # one search over every component's CDF laid end to end (component k shifted by k * shift)
        bins = len(self.lo)
        shift = float(self.cum[-1].max()) * 2.0 + 1.0
        stacked = (self.cum + np.arange(self.components) * shift).T.ravel()
        pos = np.searchsorted(stacked, target + t * shift, side="right") - 1 - t * (bins + 1)
        b = np.clip(pos, 0, bins - 1)
        frac = np.clip((target - self.cum[b, t]) / self.mass[b, t], 0.0, 1.0)
        out = self.lo[b] + frac * self.width[b]
        if self.col.integer:
            out = np.floor(out)
        return np.clip(out, self.col.lower, self.col.upper)


def mode_cdf(col: NumericColumn, counts: np.ndarray, mix: Mixture, lam: float) -> ModeCDF:
    """The ``ModeCDF`` of ``col`` from its noisy histogram ``counts`` and mixture ``mix``: each bin's
    count (floored at 0, plus ``1e-6`` of the total) shared by the responsibilities at its centre."""
    lo, hi = bin_edges(col)
    resp = mix.posterior((lo + hi) / 2.0)
    w = np.clip(np.asarray(counts, dtype=float), 0.0, None)
    mass = (w + max(w.sum(), 1.0) * 1e-6)[:, None] * resp + 1e-12
    return ModeCDF(col, mass, lam)


def repair_correlation(s: np.ndarray, eta: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric positive-definite matrix with unit diagonal near ``s``, and its Cholesky factor
    (post-processing): symmetrise, clamp eigenvalues to ``eta`` times their mean (at least
    ``eta``), rescale to unit diagonal, factorise, adding a growing ridge if that fails."""
    s = (np.asarray(s, dtype=float) + np.asarray(s, dtype=float).T) / 2.0
    if not np.all(np.isfinite(s)):
        s = np.eye(len(s))
    vals, vecs = np.linalg.eigh(s)
    floor = eta * max(float(np.mean(np.abs(vals))), 1.0)
    s = (vecs * np.maximum(vals, floor)) @ vecs.T
    d = np.sqrt(np.diag(s))
    r = s / np.outer(d, d)
    r = (r + r.T) / 2.0
    np.fill_diagonal(r, 1.0)
    ridge = eta
    while True:
        try:
            return r, np.linalg.cholesky(r)
        except np.linalg.LinAlgError:
            r = (r + ridge * np.eye(len(r))) / (1.0 + ridge)
            ridge *= 2.0


def correlation_estimate(s: np.ndarray, t: float) -> np.ndarray:
    """The copula's correlation from a noisy second moment of standard normal coordinates: unit
    diagonal (each coordinate is ``N(0, 1)`` by construction), off-diagonal entries kept where
    ``|x| > t`` and zero elsewhere (hard thresholding: a kept correlation is not shrunk), and none
    at all when ``t >= 1`` (no correlation can then be told from noise). With ``t`` a multiple of
    the noise of one entry, correlations the noise could explain are dropped instead of becoming
    spurious dependence in the copula (post-processing)."""
    out = np.where(np.abs(s) > t, s, 0.0) if t < 1 else np.zeros_like(s)
    np.fill_diagonal(out, 1.0)
    return out


def universal_threshold(width: int) -> float:
    """``sqrt(2 ln p)`` for the ``p = l (l - 1) / 2`` off-diagonal entries of an ``l x l`` matrix (at least 1)."""
    return math.sqrt(2.0 * math.log(max(width * (width - 1) / 2.0, math.e / 2.0)))


def upper(m: np.ndarray) -> np.ndarray:
    """The upper triangle of ``m``, diagonal included, row by row."""
    return m[np.triu_indices(len(m))]


def from_upper(v: np.ndarray, n: int) -> np.ndarray:
    """The symmetric ``n x n`` matrix whose upper triangle is ``v`` (inverse of ``upper``)."""
    m = np.zeros((n, n))
    m[np.triu_indices(n)] = v
    return m + np.triu(m, 1).T
