"""Gaussian and exponential mechanisms that charge the accountant before they release anything.

Noise comes from a ``NoiseSource``:
  * ``OpenDPNoise`` (the default): OpenDP's exact samplers. Counts get the discrete Gaussian on
    the integers (exact, and the fast path); real vectors get OpenDP's floating-point-safe
    Gaussian; selection is OpenDP's Gumbel noisy max (the exponential mechanism).
  * ``SeededNoise``: numpy's seeded generator, so tests and demos are reproducible. Anyone who
    knows the seed can predict the noise, so a run that uses it is marked ``seeded`` in the
    ledger and the audit fails it. It must never be used for a real release.

Exponential mechanism: with utility ``u`` of sensitivity ``D`` (``|u_r(D) - u_r(D')| <= D``),
sampling ``P[r] ~ exp(eps u_r / (2 D))`` is the Gumbel-max of ``u_r + Gumbel(2 D / eps)``; it is
``eps``-DP and ``eps^2/8``-zCDP (bounded range).
"""
from __future__ import annotations

from typing import Protocol

import numpy as np
import opendp.prelude as dp

from .accounting import Accountant

dp.enable_features("contrib")


class NoiseSource(Protocol):
    name: str
    seeded: bool

    def gaussian_counts(self, counts: np.ndarray, sigma: float) -> np.ndarray: ...

    def gaussian_reals(self, values: np.ndarray, sigma: float) -> np.ndarray: ...

    def noisy_argmax(self, scores: np.ndarray, scale: float) -> int: ...


class OpenDPNoise:
    """OpenDP's floating-point-safe samplers (fresh system randomness; cannot be seeded)."""

    name = "opendp"
    seeded = False

    def gaussian_counts(self, counts: np.ndarray, sigma: float) -> np.ndarray:
        meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"),
                                  scale=float(sigma))
        return np.asarray(meas(np.asarray(counts, dtype=np.int64).tolist()), dtype=np.int64)

    def gaussian_reals(self, values: np.ndarray, sigma: float) -> np.ndarray:
        meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                                  dp.l2_distance(T=float), scale=float(sigma))
        return np.asarray(meas(np.asarray(values, dtype=float).tolist()), dtype=float)

    def noisy_argmax(self, scores: np.ndarray, scale: float) -> int:
        meas = dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                                   dp.linf_distance(T=float), dp.zero_concentrated_divergence(),
                                   scale=float(scale))
        return int(meas(np.asarray(scores, dtype=float).tolist()))


class SeededNoise:
    """Reproducible numpy noise for tests and demos. NOT private: the seed predicts the noise."""

    name = "seeded-numpy"
    seeded = True

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def gaussian_counts(self, counts: np.ndarray, sigma: float) -> np.ndarray:
        noise = np.rint(self.rng.normal(0.0, sigma, size=np.shape(counts))).astype(np.int64)
        return np.asarray(counts, dtype=np.int64) + noise

    def gaussian_reals(self, values: np.ndarray, sigma: float) -> np.ndarray:
        return np.asarray(values, dtype=float) + self.rng.normal(0.0, sigma, size=np.shape(values))

    def noisy_argmax(self, scores: np.ndarray, scale: float) -> int:
        scores = np.asarray(scores, dtype=float)
        return int(np.argmax(scores + self.rng.gumbel(0.0, scale, size=scores.shape)))


def noise_source(seed: int | None) -> NoiseSource:
    return OpenDPNoise() if seed is None else SeededNoise(seed)


def gaussian_mechanism(acc: Accountant, noise: NoiseSource, values: np.ndarray, *, sigma: float,
                       query: str, where: str, sensitivity_l2: float = 1.0, **extra) -> np.ndarray:
    """Release ``values + N(0, sigma^2 I)``; integer input gets the discrete Gaussian.

    Charges ``sensitivity_l2^2 / (2 sigma^2)`` first; the caller states the sensitivity.
    """
    values = np.asarray(values)
    acc.gaussian(query, sensitivity_l2, sigma, where, sampler=noise.name, cells=int(values.size), **extra)
    return _add_gaussian(noise, values, sigma)


def _add_gaussian(noise: NoiseSource, values: np.ndarray, sigma: float) -> np.ndarray:
    """Discrete Gaussian for integer vectors, the continuous one otherwise."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.integer):
        return noise.gaussian_counts(values, sigma)
    return noise.gaussian_reals(values, sigma)


def exponential_mechanism(acc: Accountant, noise: NoiseSource, scores: np.ndarray, *, epsilon: float,
                          sensitivity: float, query: str, where: str, **extra) -> int:
    """Index ``r`` drawn with probability proportional to ``exp(epsilon * scores[r] / (2 sensitivity))``.

    Charges ``epsilon^2 / 8`` first.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError("exponential mechanism needs a non-empty vector of finite scores")
    acc.exponential(query, sensitivity, epsilon, where, sampler=noise.name, candidates=int(scores.size), **extra)
    return noise.noisy_argmax(scores, 2.0 * sensitivity / epsilon)


def parallel_exponential_mechanism(acc: Accountant, noise: NoiseSource, scores: dict[str, np.ndarray], *,
                                   epsilon: float, sensitivity: float, query: str, where: str,
                                   **extra) -> dict[str, int]:
    """One exponential mechanism per silo, each on that silo's own rows only.

    The silos hold disjoint records (a neighbouring dataset adds or removes one record in one
    silo), so by parallel composition the whole set costs what one costs: ``epsilon^2 / 8``,
    charged once with ``parallel_over: silos``.
    """
    for name, s in scores.items():
        s = np.asarray(s, dtype=float)
        if s.size == 0 or not np.all(np.isfinite(s)):
            raise ValueError(f"{name}: exponential mechanism needs a non-empty vector of finite scores")
    charge_parallel_exponential(acc, noise.name, list(scores), epsilon=epsilon, sensitivity=sensitivity,
                                query=query, where=where, **extra)
    return {name: noise.noisy_argmax(np.asarray(s, dtype=float), 2.0 * sensitivity / epsilon)
            for name, s in scores.items()}


def charge_parallel_exponential(acc: Accountant, sampler: str, silos, *, epsilon: float, sensitivity: float,
                                query: str, where: str = "silo", **extra) -> None:
    """The one charge of an exponential mechanism each silo runs on its own rows (``epsilon^2 / 8``)."""
    acc.exponential(query, sensitivity, epsilon, where, sampler=sampler, parallel_over="silos",
                    silos=sorted(silos), **extra)


def parallel_gaussian_mechanism(acc: Accountant, noise: NoiseSource, values: dict[str, np.ndarray], *,
                                sigma: float, query: str, where: str, sensitivity_l2: float = 1.0,
                                **extra) -> dict[str, np.ndarray]:
    """``values[k] + N(0, sigma^2 I)`` for each silo ``k`` on its own rows; charged once
    (``sensitivity_l2^2 / (2 sigma^2)``, parallel composition over disjoint silos)."""
    acc.gaussian(query, sensitivity_l2, sigma, where, sampler=noise.name, parallel_over="silos",
                 silos=sorted(values), **extra)
    return {name: _add_gaussian(noise, v, sigma) for name, v in values.items()}
