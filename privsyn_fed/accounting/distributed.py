"""Noise that the parties generate themselves: each of the ``n`` parties adds its own draw, and a
coalition of up to ``t`` parties (the collusion threshold) knows its members' draws, so only the
``k = n - t`` honest parties' noise protects a record. ``t`` is at least 1: every party knows its
own draw and sees the release, so each one alone is such a coalition.

Gaussian measurements. Each party adds ``N_Z(0, s^2)`` (OpenDP's exact discrete Gaussian). The sum
of ``k`` independent ``N_Z(0, s^2)`` is *not* a discrete Gaussian; Kairouz, Liu and Steinke ("The
distributed discrete Gaussian mechanism for federated learning with secure aggregation", ICML 2021,
Proposition 14, building on Canonne, Kamath and Steinke 2020) bound it: for ``s >= 1/2``, every
integer shift ``Delta`` of ``d`` coordinates and every ``alpha >= 1``,
    ``D_alpha(Z || Z + Delta) <= alpha ||Delta||^2 / (2 k s^2) + tau d``,
    ``tau = 10 sum_{j=1}^{k-1} exp(-2 pi^2 s^2 j / (j + 1))``,
so the release is ``rho``-zCDP with ``rho = ||Delta||^2 / (2 k s^2) + tau d`` (for ``alpha >= 1``,
``alpha A + tau d <= alpha (A + tau d)``). With ``k = 1``, ``tau = 0``: one exact discrete Gaussian. The coalition's own
draws are known constants, which change nothing. ``party_sigma`` picks ``s`` so that this bound is
the planned ``D^2 / (2 sigma^2)``; with all ``n`` parties honest the total noise is then
``N(0, n s^2)``, ``n / k`` times the planned variance: the price of tolerating ``t`` colluders.

Selections. Each of ``t + 1`` parties (ranks ``0..t``) adds its own exactly rounded Gumbel
``round(b G)`` to every integer score and the noisy maximum is opened. Any coalition of up to ``t``
misses one of them, and one unknown Gumbel suffices: fix every other draw ``Y`` (the coalition's
known ones included); what remains is the exponential mechanism on the shifted scores ``u + Y``,
whose sensitivity is that of ``u``, so it is ``eps^2 / 8``-zCDP (bounded range ``eps = 2 Delta /
b``, plus the rounding's ``4 / b``, as for a single rounded Gumbel). The release mixes these over
``Y``, with weights that do not depend on the data, and Renyi divergence is jointly quasi-convex
(van Erven and Harremoes 2014, Theorem 13), so the mixture costs no more than its worst part:
``eps^2 / 8``, exactly the single exponential mechanism's cost. The extra draws only add noise
(``sqrt(t + 1)`` times the Gumbel's spread).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The smallest per-party sigma the published bound covers.
MIN_PARTY_SIGMA = 0.5


def kls_tau(sigma_party: float, honest: int) -> float:
    """``tau = 10 sum_{j=1}^{k-1} exp(-2 pi^2 s^2 j / (j + 1))`` (module docstring)."""
    return 10.0 * math.fsum(math.exp(-2.0 * math.pi**2 * sigma_party**2 * j / (j + 1)) for j in range(1, int(honest)))


def distributed_gaussian_rho(
    sensitivity_l2: float, sigma_party: float, honest: int, cells: int, grid: float = 1.0
) -> float:
    """zCDP cost of the sum of ``honest`` parties' discrete Gaussians of sigma ``s`` on the integer
    multiples of ``grid`` (1 for counts; ``2^-16`` for real sums on shares), over ``cells`` cells:
    in grid units, ``D^2 / (2 k s^2) + tau(s) d``."""
    s, d = sigma_party / grid, sensitivity_l2 / grid
    if not s >= MIN_PARTY_SIGMA:
        raise ValueError(f"each party's sigma must be at least {MIN_PARTY_SIGMA} grid steps, not {s!r}")
    return d**2 / (2.0 * honest * s**2) + kls_tau(s, honest) * cells


@dataclass(frozen=True)
class PartiesNoise:
    """Noise drawn by each of ``parties`` parties, a coalition of up to ``collusion`` of which may
    pool what they know."""

    parties: int
    collusion: int

    def __post_init__(self):
        if not (self.parties >= 2 and 1 <= self.collusion < self.parties):
            raise ValueError(
                f"the collusion threshold must lie in 1..{self.parties - 1} for {self.parties} parties, "
                f"not {self.collusion}"
            )

    @property
    def honest(self) -> int:
        """``k = n - t``: the parties whose noise is unknown to any tolerated coalition."""
        return self.parties - self.collusion

    def party_sigma(self, sensitivity_l2: float, sigma: float, cells: int, grid: float = 1.0) -> float:
        """The per-party ``s`` whose distributed cost is the planned ``D^2 / (2 sigma^2)`` (the
        bisection's upper end, so the charged cost never exceeds the plan), and at least the bound's
        smallest ``1/2`` grid step: below it each party adds more noise than planned and the
        release costs less."""
        target = sensitivity_l2**2 / (2.0 * sigma**2)

        def cost(s: float) -> float:
            return distributed_gaussian_rho(sensitivity_l2, s, self.honest, cells, grid)

        lo = max(sigma / math.sqrt(self.honest), MIN_PARTY_SIGMA * grid)
        if cost(lo) <= target:
            return lo
        hi = lo * 2.0
        while cost(hi) > target:
            hi *= 2.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if cost(mid) > target else (lo, mid)
            if hi - lo <= hi * 1e-15:
                break
        return hi

    @property
    def selection_parties(self) -> int:
        """``t + 1``: the parties (ranks ``0..t``) that add Gumbel noise to a selection; one of them
        lies outside any tolerated coalition."""
        return self.collusion + 1

    def fields(self, grid: float = 1.0) -> dict[str, Any]:
        """The ledger's ``distributed`` field: what the audit needs to recompute the cost."""
        split: dict[str, Any] = {"parties": self.parties, "collusion": self.collusion}
        return {"distributed": {**split, "grid": grid} if grid != 1.0 else split}

    def accuracy_cost(self) -> float:
        """The total noise's standard deviation, all parties honest, over the planned one: ``sqrt(n / k)``."""
        return math.sqrt(self.parties / self.honest)
