"""Noise sources: where the randomness of every mechanism comes from.

  * ``OpenDPNoise`` (the default): OpenDP's exact samplers. Counts get the discrete Gaussian on
    the integers (exact, and the fast path); real vectors get OpenDP's floating-point-safe
    Gaussian; selection is OpenDP's Gumbel noisy max (the exponential mechanism).
  * ``SeededNoise``: numpy's seeded generator, so tests and demos are reproducible. Anyone who
    knows the seed can predict the noise, so a run that uses it is marked ``seeded`` in the
    ledger and the audit fails it. It must never be used for a real release.
A noise source only adds noise; charging the ledger is ``mechanisms``' job.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

# OpenDP's modules one by one: ``opendp.prelude`` also imports its optional extras (scikit-learn,
# about 0.6 s of every process's start-up)
from opendp import measurements
from opendp.domains import atom_domain, vector_domain
from opendp.measures import zero_concentrated_divergence
from opendp.metrics import l2_distance, linf_distance
from opendp.mod import enable_features

enable_features("contrib")


class NoiseSource(Protocol):
    """A sampler of Gaussian and Gumbel-max noise."""

    name: str
    seeded: bool

    def gaussian_counts(self, counts: np.ndarray, sigma: float) -> np.ndarray:
        """``counts`` plus integer Gaussian noise of scale ``sigma`` (int64)."""

    def gaussian_reals(self, values: np.ndarray, sigma: float) -> np.ndarray:
        """``values + N(0, sigma^2)`` (float64)."""

    def noisy_argmax(self, scores: np.ndarray, scale: float) -> int:
        """The index of the largest of ``scores`` plus Gumbel noise of scale ``scale``."""


class OpenDPNoise:
    """OpenDP's floating-point-safe samplers (fresh system randomness; cannot be seeded)."""

    name = "opendp"
    seeded = False

    def gaussian_counts(self, counts: np.ndarray, sigma: float) -> np.ndarray:
        """``counts + N_Z(0, sigma^2)`` from OpenDP's exact discrete Gaussian sampler."""
        meas = measurements.make_gaussian(vector_domain(atom_domain(T="i64")), l2_distance(T="i64"), scale=float(sigma))
        return np.asarray(meas(np.asarray(counts, dtype=np.int64).tolist()), dtype=np.int64)

    def gaussian_reals(self, values: np.ndarray, sigma: float) -> np.ndarray:
        """``values + N(0, sigma^2)`` from OpenDP's floating-point-safe Gaussian sampler."""
        meas = measurements.make_gaussian(
            vector_domain(atom_domain(T=float, nan=False)), l2_distance(T=float), scale=float(sigma)
        )
        return np.asarray(meas(np.asarray(values, dtype=float).tolist()), dtype=float)

    def noisy_argmax(self, scores: np.ndarray, scale: float) -> int:
        """OpenDP's noisy max of ``scores`` with Gumbel noise of scale ``scale`` (``make_noisy_max``, zCDP)."""
        meas = measurements.make_noisy_max(
            vector_domain(atom_domain(T=float, nan=False)),
            linf_distance(T=float),
            zero_concentrated_divergence(),
            scale=float(scale),
        )
        return int(meas(np.asarray(scores, dtype=float).tolist()))


class SeededNoise:
    """Reproducible numpy noise for tests and demos. NOT private: the seed predicts the noise."""

    name = "seeded-numpy"
    seeded = True

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def gaussian_counts(self, counts: np.ndarray, sigma: float) -> np.ndarray:
        """``counts + round(N(0, sigma^2))`` from the seeded generator (not the discrete Gaussian)."""
        noise = np.rint(self.rng.normal(0.0, sigma, size=np.shape(counts))).astype(np.int64)
        return np.asarray(counts, dtype=np.int64) + noise

    def gaussian_reals(self, values: np.ndarray, sigma: float) -> np.ndarray:
        """``values + N(0, sigma^2)`` from the seeded generator."""
        return np.asarray(values, dtype=float) + self.rng.normal(0.0, sigma, size=np.shape(values))

    def noisy_argmax(self, scores: np.ndarray, scale: float) -> int:
        """``argmax(scores + Gumbel(0, scale))`` from the seeded generator."""
        scores = np.asarray(scores, dtype=float)
        return int(np.argmax(scores + self.rng.gumbel(0.0, scale, size=scores.shape)))


def noise_source(seed: int | None) -> NoiseSource:
    """OpenDP's samplers, or seeded numpy noise (not private) when ``seed`` is given."""
    return OpenDPNoise() if seed is None else SeededNoise(seed)


def add_gaussian(noise: NoiseSource, values: np.ndarray, sigma: float) -> np.ndarray:
    """Discrete Gaussian for integer vectors, the continuous one otherwise."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.integer):
        return noise.gaussian_counts(values, sigma)
    return noise.gaussian_reals(values, sigma)
