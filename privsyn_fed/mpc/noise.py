"""Each party's own noise samplers: exact distributions on the integers, from the operating system's CSPRNG.

Secure select and measure work on integer shares (ring Z_{2^64}); every party adds its own integer
noise to them as a share, so no single process knows the total (``accounting.distributed`` costs
the sum). The samplers:
  * ``discrete_gaussian(n, sigma)``: OpenDP's exact discrete Gaussian ``N_Z(0, sigma^2)``
    (``P[z] ~ exp(-z^2 / (2 sigma^2))``); ``rho = Delta^2 / (2 sigma^2)`` exactly, as in the clear.
  * ``rounded_gumbel(n, scale)``: ``K = round(scale * G)`` with ``G`` a standard Gumbel, sampled
    exactly: ``U`` is drawn bit by bit and compared with the cell boundaries
    ``F((k -+ 1/2) / scale)``, ``F(x) = exp(-exp(-x))``, evaluated with mpmath at a precision
    well beyond the bits drawn; when ``U``'s interval straddles a boundary, more bits are drawn.
    So ``P[K = k] = F((k + 1/2)/scale) - F((k - 1/2)/scale)`` with no tail cut and no float error.

Why rounding costs almost nothing (and is charged): with every other party's draw fixed, argmax
of ``u + K`` differs from argmax of ``u + scale G`` only through ``|K - scale G| <= 1/2`` per
candidate, so every output's probability lies within ``exp(+-1/scale)`` of the exact exponential
mechanism's. With bounded range ``eps`` exact, the rounded mechanism has bounded range
``eps + 4/scale`` and is ``(eps + 4/scale)^2 / 8``-zCDP (``gumbel_rounding_slack``).

``SeededPartyNoise`` replaces both by numpy's seeded generator for reproducible tests and demos;
a run that uses it is marked ``seeded`` and is not private.
"""

from __future__ import annotations

import math
import secrets
from typing import Callable

import mpmath
import numpy as np

from ..noise import OpenDPNoise

Bits = Callable[[int], int]


def gumbel_rounding_slack(scale: float) -> float:
    """Extra bounded range from rounding Gumbel noise of scale ``scale`` (grid units) to integers."""
    return 4.0 / scale


def discrete_gaussian(n: int, sigma: float) -> np.ndarray:
    """``n`` independent draws of ``N_Z(0, sigma^2)`` (OpenDP's exact sampler)."""
    return OpenDPNoise().gaussian_counts(np.zeros(n, dtype=np.int64), sigma)


def _gumbel_cdf(x):
    return mpmath.exp(-mpmath.exp(-x))


def rounded_gumbel_one(scale: float, randbits: Bits = secrets.randbits, first_bits: int = 64) -> int:
    """One exact draw of ``round(scale * G)``, ``G`` standard Gumbel (see the module docstring)."""
    s = mpmath.mpf(scale)
    nbits, m = first_bits, randbits(first_bits)
    while True:
        with mpmath.workprec(nbits + 96):
            width = mpmath.ldexp(1, -nbits)
            lo, hi = m * width, (m + 1) * width
            guess = -mpmath.log(-mpmath.log(lo + width / 2)) * s
            k = int(mpmath.nint(guess))
            margin = mpmath.ldexp(1, -(nbits + 80))
            for _ in range(64):
                a, b = _gumbel_cdf((k - 0.5) / s), _gumbel_cdf((k + 0.5) / s)
                if hi <= a - margin:
                    k -= 1
                elif lo >= b + margin:
                    k += 1
                elif a + margin <= lo and hi <= b - margin:
                    return k
                else:
                    break  # U's interval straddles a cell boundary: draw more bits
        m = (m << 32) | randbits(32)
        nbits += 32


def rounded_gumbel(n: int, scale: float, randbits: Bits = secrets.randbits) -> np.ndarray:
    """``n`` independent exact draws of ``round(scale * G)``."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"Gumbel scale must be positive and finite, not {scale!r}")
    return np.array([rounded_gumbel_one(scale, randbits) for _ in range(n)], dtype=np.int64)


def rounded_gumbel_pmf(k: np.ndarray, scale: float) -> np.ndarray:
    """``P[round(scale G) = k]`` (for tests and the fixed-point analysis)."""
    k = np.asarray(k, dtype=float)
    cdf = lambda x: np.exp(-np.exp(-x))  # noqa: E731
    return cdf((k + 0.5) / scale) - cdf((k - 0.5) / scale)


class ExactPartyNoise:
    """A party's own private noise: OpenDP's exact discrete Gaussian and exactly rounded Gumbel
    (operating system's CSPRNG); no other process learns it."""

    name = "each party's own: exact discrete Gaussian (OpenDP) / exactly rounded Gumbel (CSPRNG)"
    seeded = False

    def gaussian(self, n: int, sigma: float) -> np.ndarray:
        """``n`` draws of ``N_Z(0, sigma^2)`` (``discrete_gaussian``)."""
        return discrete_gaussian(n, sigma)

    def gumbel(self, n: int, scale: float) -> np.ndarray:
        """``n`` exact draws of ``round(scale * G)`` (``rounded_gumbel``)."""
        return rounded_gumbel(n, scale)


class SeededPartyNoise:
    """Seeded numpy noise (rounded normal, rounded Gumbel), one stream per ``(seed, rank)``. NOT
    private: the seed predicts it."""

    name = "each party's own: seeded numpy (not private)"
    seeded = True

    def __init__(self, seed: int, rank: int):
        self.rng = np.random.default_rng([seed, rank])

    def gaussian(self, n: int, sigma: float) -> np.ndarray:
        """``n`` draws of ``round(N(0, sigma^2))`` from the seeded generator."""
        return np.rint(self.rng.normal(0.0, sigma, n)).astype(np.int64)

    def gumbel(self, n: int, scale: float) -> np.ndarray:
        """``n`` draws of ``round(scale * G)`` from the seeded generator."""
        return np.rint(self.rng.gumbel(0.0, scale, n)).astype(np.int64)


def party_noise(seed: int | None, rank: int) -> ExactPartyNoise | SeededPartyNoise:
    """This party's noise source: exact and private, or seeded for tests (``--seed``)."""
    return ExactPartyNoise() if seed is None else SeededPartyNoise(seed, rank)
